"""The gRPC frontend over a real ``pteforge serve``, with an unmodified ``tritonclient.grpc``:
health and metadata, raw-tensor infer against eager PyTorch, auth, project scoping and
input errors as gRPC status codes, a KV-cached decode loop as a sequence over
``ModelStreamInfer``, a model name, and the statistics extension."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import torch
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from tests.cluster.haproxy import LoadBalancer
from tests.models import MultiMethod
from tests.runtime.stateful_models import reset_state
from tests.server.helpers import peak_growth_kib
from tests.server.model_names import deploy
from tests.server.service import ServiceProcess

STEPS = 6


@pytest.fixture(scope="module")
def client(service: ServiceProcess) -> Iterator[triton.InferenceServerClient]:
    with triton.InferenceServerClient(f"127.0.0.1:{service.grpc_port}") as grpc_client:
        yield grpc_client


@pytest.fixture(scope="module")
def headers(admin: httpx.Client) -> dict[str, str]:
    """The admin's bearer token as ``tritonclient.grpc`` sends it: ``authorization`` metadata."""
    return {"authorization": str(admin.headers["Authorization"])}


class Calls:
    """Builds a method's inputs under the names its metadata gives, and reads its output."""

    def __init__(self, client: triton.InferenceServerClient, headers: dict[str, str]) -> None:
        self.client, self.headers = client, headers

    def metadata(self, model: str) -> Any:
        return self.client.get_model_metadata(model, headers=self.headers, as_json=True)

    def inputs(self, model: str, *arrays: np.ndarray) -> list[triton.InferInput]:
        specs = self.metadata(model)["inputs"]
        inputs = []
        for spec, array in zip(specs, arrays, strict=True):
            entry = triton.InferInput(spec["name"], list(array.shape), spec["datatype"])
            entry.set_data_from_numpy(array)  # sent as raw_input_contents
            inputs.append(entry)
        return inputs

    def output(self, model: str, result: Any) -> np.ndarray:
        return result.as_numpy(self.metadata(model)["outputs"][0]["name"])  # type: ignore[no-any-return]

    def infer(self, model: str, *arrays: np.ndarray) -> np.ndarray:
        inputs = self.inputs(model, *arrays)
        return self.output(model, self.client.infer(model, inputs, headers=self.headers))


@pytest.fixture(scope="module")
def calls(client: triton.InferenceServerClient, headers: dict[str, str]) -> Calls:
    return Calls(client, headers)


def _eager(model: MultiMethod, method: str, *args: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return model.eager[method](*args).numpy()  # type: ignore[no-any-return]


def _reset(model: MultiMethod) -> None:
    reset_state(model.eager["prefill"].model)  # type: ignore[union-attr]


def _assert_eager(got: np.ndarray, model: MultiMethod, method: str, *arrays: np.ndarray) -> None:
    """``got`` is what eager PyTorch answers to one call of ``method`` on ``arrays``, with the
    model's state reset first (the call the server answered was its first too)."""
    _reset(model)
    expected = _eager(model, method, *map(torch.from_numpy, arrays))
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def _code(error: pytest.ExceptionInfo[InferenceServerException]) -> str:
    return str(error.value.status()).removeprefix("StatusCode.")


def test_health_and_server_metadata(
    client: triton.InferenceServerClient, headers: dict[str, str]
) -> None:
    assert client.is_server_live() and client.is_server_ready()
    metadata = client.get_server_metadata(headers=headers, as_json=True)
    assert metadata["name"] == "pteforge" and "sequence" in metadata["extensions"]
    with pytest.raises(InferenceServerException) as missing:
        client.get_server_metadata()
    assert _code(missing) == "UNAUTHENTICATED"


def test_infer_with_raw_tensors_matches_eager(
    calls: Calls, cached_lm: tuple[MultiMethod, str]
) -> None:
    model, artifact = cached_lm
    (prompt,) = model.inputs["prefill"]
    assert [t["datatype"] for t in calls.metadata(f"{artifact}.prefill")["inputs"]] == ["INT64"]
    assert calls.client.is_model_ready(f"{artifact}.prefill", headers=calls.headers)
    got = calls.infer(f"{artifact}.prefill", prompt.numpy())
    _assert_eager(got, model, "prefill", prompt.numpy())


def test_errors_map_to_status_codes(
    service: ServiceProcess, calls: Calls, cached_lm: tuple[MultiMethod, str]
) -> None:
    client = calls.client
    _, artifact = cached_lm
    model = f"{artifact}.decode"
    step = calls.inputs(model, np.array([[1]]), np.array([0]))
    with pytest.raises(InferenceServerException) as anonymous:
        client.infer(model, step)
    assert _code(anonymous) == "UNAUTHENTICATED"
    outsider = {"authorization": f"Bearer {service.create_token('grpc-out', 'grpc-other')}"}
    with pytest.raises(InferenceServerException) as hidden:
        client.infer(model, step, headers=outsider)
    assert _code(hidden) == "NOT_FOUND"
    assert not client.is_model_ready(model, headers=outsider)
    wrong = calls.inputs(model, np.array([[1, 2]]), np.array([0]))
    with pytest.raises(InferenceServerException) as shape:
        client.infer(model, wrong, headers=calls.headers)
    name = wrong[0].name()
    assert _code(shape) == "INVALID_ARGUMENT" and repr(name) in str(shape.value.message())


def test_a_call_without_a_token_is_refused_before_its_message_is_read(
    service: ServiceProcess, calls: Calls, cached_lm: tuple[MultiMethod, str]
) -> None:
    """grpcio reads a unary call's whole message before its handler runs: 8 calls of 200 MiB
    without a token took the server 2.7 GB. Now the message is read only once the caller is
    known, so 64 MiB sent without a token leave the server's memory as it was."""
    _, artifact = cached_lm
    huge = triton.InferInput("tokens", [8 << 20], "INT64")
    huge.set_data_from_numpy(np.zeros(8 << 20, dtype=np.int64))
    code, grown_kib = peak_growth_kib(service.proc.pid, lambda: _refused(calls, artifact, huge))
    assert code == "UNAUTHENTICATED"
    assert grown_kib < 16 * 1024, grown_kib  # without the fix: about 64 MiB
    assert calls.client.is_server_live()  # open calls answer as before


@pytest.mark.parametrize("method", ["ModelInfer", "ModelMetadata", "ModelStatistics"])
def test_a_message_protobuf_cannot_parse_is_invalid_argument(
    service: ServiceProcess, headers: dict[str, str], method: str
) -> None:
    """A model name that is not UTF-8 (protobuf strings must be) was UNKNOWN, "Unexpected
    DecodeError", with a traceback in the server's log for each call."""
    name = b"\xed\xa0\x80\xff"
    message = b"\x0a" + bytes([len(name)]) + name  # field 1, the model's name
    with grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
        call = channel.unary_unary(f"/inference.GRPCInferenceService/{method}")
        with pytest.raises(grpc.RpcError) as refused:
            call(message, metadata=list(headers.items()), timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
    assert "cannot be read: Error parsing message" in str(refused.value.details())


def test_a_stream_message_protobuf_cannot_parse_is_its_error_message(
    service: ServiceProcess, headers: dict[str, str]
) -> None:
    """On ``ModelStreamInfer`` the same message ended the stream UNKNOWN, with a traceback:
    it is now that request's ``error_message``, and the stream goes on."""
    from tritonclient.grpc import service_pb2 as pb

    name = b"\xed\xa0\x80\xff"
    unreadable = b"\x0a" + bytes([len(name)]) + name
    readable = pb.ModelInferRequest(model_name="no-such-model.forward").SerializeToString()
    with grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
        stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        answers = stream(iter([unreadable, readable]), metadata=list(headers.items()), timeout=30)
        errors = [pb.ModelStreamInferResponse.FromString(a).error_message for a in answers]
    assert len(errors) == 2
    assert errors[0].startswith("the request message cannot be read: Error parsing message")
    assert "no-such-model" in errors[1]


def _refused(calls: Calls, artifact: str, tensor: triton.InferInput) -> str:
    with pytest.raises(InferenceServerException) as refused:
        calls.client.infer(f"{artifact}.prefill", [tensor])  # no token
    return _code(refused)


class Stream:
    """A ``ModelStreamInfer`` stream whose responses are read one per request, in order."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
        calls.client.start_stream(
            lambda result, error: self.answers.put((result, error)), headers=calls.headers
        )

    def __call__(self, model: str, *arrays: np.ndarray, **sequence: Any) -> np.ndarray:
        self.calls.client.async_stream_infer(model, self.calls.inputs(model, *arrays), **sequence)
        result, error = self.answers.get(timeout=120)
        assert error is None, error
        return self.calls.output(model, result)


def test_decode_loop_over_a_stream_carries_its_sequence(
    calls: Calls, cached_lm: tuple[MultiMethod, str]
) -> None:
    """Greedy decoding, one stream request per token: each step reads the KV cache the
    previous ones wrote, so every step's logits match eager PyTorch's."""
    model, artifact = cached_lm
    (prompt,) = model.inputs["prefill"]
    _reset(model)
    stream = Stream(calls)
    try:
        logits = stream(f"{artifact}.prefill", prompt.numpy(), sequence_id=7, sequence_start=True)
        expected = _eager(model, "prefill", prompt)
        for i in range(STEPS):
            np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=1e-4)
            token = np.array([[int(logits[0, -1].argmax())]])
            pos = np.array([prompt.shape[1] + i])
            end = i == STEPS - 1
            logits = stream(f"{artifact}.decode", token, pos, sequence_id=7, sequence_end=end)
            expected = _eager(model, "decode", torch.from_numpy(token), torch.from_numpy(pos))
        np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=1e-4)
    finally:
        calls.client.stop_stream()


def test_a_model_name_serves_over_grpc_and_counts_in_its_statistics(
    admin: httpx.Client, calls: Calls, cached_lm: tuple[MultiMethod, str]
) -> None:
    client, headers = calls.client, calls.headers
    model, artifact = cached_lm
    deploy(admin, "grpc-named", artifact)
    version = str(deploy(admin, "grpc-named", artifact)["version"])
    step = (np.array([[3]]), np.array([0]))
    got = calls.infer("grpc-named.decode", *step)
    _assert_eager(got, model, "decode", *step)
    stats = client.get_inference_statistics("grpc-named.decode", headers=headers, as_json=True)
    (entry,) = stats["model_stats"]
    assert entry["name"] == "grpc-named.decode"
    assert int(entry["inference_stats"]["success"]["count"]) == 1
    answer = client.infer(
        "grpc-named.decode", calls.inputs("grpc-named.decode", *step), headers=headers
    )
    assert answer.get_response().model_version == version  # the version that answered


def test_the_load_balancers_grpc_frontend_reaches_a_replica(
    service: ServiceProcess,
    headers: dict[str, str],
    cached_lm: tuple[MultiMethod, str],
    tmp_path: Path,
) -> None:
    """``docker/haproxy.cfg``'s gRPC frontend (HTTP/2 both ways) in front of this server."""
    model, artifact = cached_lm
    balancer = LoadBalancer([service.port], tmp_path, grpc_ports=[service.grpc_port])
    balancer.start()
    try:
        with triton.InferenceServerClient(f"127.0.0.1:{balancer.grpc_port}") as through:
            step = (np.array([[5]]), np.array([0]))
            got = Calls(through, headers).infer(f"{artifact}.decode", *step)
    finally:
        balancer.stop()
    _assert_eager(got, model, "decode", *step)


def test_two_authorizations_are_refused_over_http_and_grpc(
    service: ServiceProcess, headers: dict[str, str]
) -> None:
    """HTTP took the first Authorization header and gRPC the last authorization entry, so a
    valid token next to another passed or not by their order, as a proxy in front that
    checks or adds one may not (attack pass, item 7): two are now 401 / UNAUTHENTICATED."""
    valid, other = headers["authorization"], "Bearer ptf_someone-elses"
    for pair in ([valid, other], [other, valid]):
        sent = [("authorization", value) for value in pair]
        for path in ("/v1/programs", "/v2/models/x/ready"):
            answer = httpx.get(f"{service.url}{path}", headers=sent)
            assert answer.status_code == 401, answer.text
            assert "2 Authorization headers: send one" in answer.text
        with grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
            call = channel.unary_unary("/inference.GRPCInferenceService/ModelMetadata")
            with pytest.raises(grpc.RpcError) as refused:
                call(b"\x0a\x01x", metadata=sent, timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "2 Authorization headers" in str(refused.value.details())
    assert httpx.get(f"{service.url}/v1/programs", headers=headers).status_code == 200
