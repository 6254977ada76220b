"""The gRPC frontend's parts on their own: ``ModelInferRequest`` tensors (raw and typed
contents) checked like /v2 bodies, the response's raw outputs, the one status table, and a
taken port refused with a clear error."""

from __future__ import annotations

import asyncio
import socket
import tracemalloc
from pathlib import Path

import grpc
import ml_dtypes
import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as rpc

from pteforge.cli import main
from pteforge.runtime import InvalidInputError, WorkerTimeoutError
from pteforge.runtime.errors import ProtocolError, SessionLimitError
from pteforge.runtime.metadata import MethodSignature, TensorSpec
from pteforge.server.errors import UnauthorizedError
from pteforge.server.grpc_api import GrpcPortError, start_grpc_server
from pteforge.server.grpc_api.codec import decode_request, encode_response
from pteforge.server.grpc_api.status import grpc_status
from pteforge.server.inference.statuses import NotFoundError
from tests.server.service import free_port

SIG = MethodSignature(
    "decode",
    (TensorSpec("tokens", "int64", (1, 2)), TensorSpec("memory", "float32", (2,))),
    (TensorSpec("logits", "float32", (2,)),),
)


def _request(raw: bool, memory_shape: tuple[int, ...] = (2,)) -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name="a.decode", id="r1")
    request.parameters["sequence_id"].int64_param = 9
    request.parameters["sequence_start"].bool_param = True
    tokens, memory = np.array([[3, 4]], dtype=np.int64), np.array([0.5, 1.5], dtype=np.float32)
    for name, datatype, array in (("memory", "FP32", memory), ("tokens", "INT64", tokens)):
        shape = memory_shape if name == "memory" else array.shape
        tensor = request.inputs.add(name=name, datatype=datatype, shape=list(shape))
        if raw:
            request.raw_input_contents.append(array.tobytes())
        elif datatype == "FP32":
            tensor.contents.fp32_contents.extend(array.tolist())
        else:
            tensor.contents.int64_contents.extend(array.reshape(-1).tolist())
    return request


@pytest.mark.parametrize("raw", [True, False])
def test_inputs_are_decoded_in_signature_order(raw: bool) -> None:
    decoded = decode_request(_request(raw), SIG)
    np.testing.assert_array_equal(decoded.inputs[0], [[3, 4]])
    np.testing.assert_array_equal(decoded.inputs[1], np.array([0.5, 1.5], dtype=np.float32))
    assert decoded.parameters == {"sequence_id": 9, "sequence_start": True}
    assert decoded.id == "r1" and [o.name for o in decoded.outputs] == ["logits"]


def test_a_wrong_shape_or_size_names_the_input() -> None:
    with pytest.raises(InvalidInputError, match="'memory': expected shape"):
        decode_request(_request(raw=True, memory_shape=(3,)), SIG)
    short = _request(raw=True)
    short.raw_input_contents[0] = b"\0" * 4
    with pytest.raises(InvalidInputError, match="'memory': raw contents are 4 bytes"):
        decode_request(short, SIG)
    both = _request(raw=True)  # the raw bytes were taken, the contents ignored
    both.inputs[0].contents.fp32_contents.extend([0.5, 1.5])
    with pytest.raises(ProtocolError, match="'memory': both raw_input_contents and contents"):
        decode_request(both, SIG)
    twice = _request(raw=True)  # each is sent: 300 times a 1 MiB output, 300 MiB
    twice.outputs.add(name="logits")
    twice.outputs.add(name="logits")
    with pytest.raises(InvalidInputError, match="output 'logits' is asked for more than once"):
        decode_request(twice, SIG)
    unknown = _request(raw=True)
    unknown.outputs.add(name="nope")
    with pytest.raises(InvalidInputError, match="unknown output 'nope'"):
        decode_request(unknown, SIG)


def test_shared_memory_tensors_are_refused_not_ignored() -> None:
    """No shared-memory extension is served: an output asked into a region came back in
    the response while the client read its region (attack pass)."""
    into_region = _request(raw=True)
    into_region.outputs.add(name="logits").parameters["shared_memory_region"].string_param = "o"
    with pytest.raises(ProtocolError, match="output 'logits': 'shared_memory_region': shared"):
        decode_request(into_region, SIG)
    from_region = _request(raw=False)
    from_region.inputs[0].parameters["shared_memory_byte_size"].int64_param = 8
    with pytest.raises(ProtocolError, match="input 'memory': 'shared_memory_byte_size'"):
        decode_request(from_region, SIG)


def test_outputs_go_back_as_raw_contents() -> None:
    decoded = decode_request(_request(raw=True), SIG)
    logits = np.array([1.0, -2.0], dtype=np.float32)
    response = encode_response("a.decode", decoded, SIG, [logits], {"cache_hit": True})
    assert response.id == "r1" and response.parameters["cache_hit"].bool_param
    assert (response.outputs[0].name, response.outputs[0].datatype) == ("logits", "FP32")
    np.testing.assert_array_equal(np.frombuffer(response.raw_output_contents[0], "<f4"), logits)


def test_bf16_goes_raw_both_ways_and_a_wrong_size_is_refused() -> None:
    """BF16 is raw only, 2 bytes an element (ml_dtypes' bfloat16, as tritonclient holds it)."""
    sig = MethodSignature("forward", (TensorSpec("x", "bfloat16", (2,)),), SIG.outputs)
    values = np.array([1.5, -0.25], dtype=ml_dtypes.bfloat16)
    request = pb.ModelInferRequest(model_name="a")
    request.inputs.add(name="x", datatype="BF16", shape=[2])
    request.raw_input_contents.append(values.tobytes())
    decoded = decode_request(request, sig)
    assert decoded.inputs[0].tobytes() == values.tobytes()
    response = encode_response("a", decoded, SIG, [values], {})
    assert response.outputs[0].datatype == "BF16"
    assert response.raw_output_contents[0] == values.tobytes()
    request.raw_input_contents[0] = values.tobytes() + b"\0"
    with pytest.raises(InvalidInputError, match="'x': raw contents are 5 bytes, shape"):
        decode_request(request, sig)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InvalidInputError("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (NotFoundError("x"), grpc.StatusCode.NOT_FOUND),
        (UnauthorizedError("x"), grpc.StatusCode.UNAUTHENTICATED),
        (SessionLimitError("x"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (WorkerTimeoutError("x"), grpc.StatusCode.UNAVAILABLE),
        (ValueError("a bug"), grpc.StatusCode.INTERNAL),
    ],
)
def test_errors_map_to_one_status_each(error: Exception, code: grpc.StatusCode) -> None:
    assert grpc_status(error)[0] is code


def test_a_taken_port_fails_startup_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(GrpcPortError, match=f"127.0.0.1:{port}.*--grpc-port 0"):
            asyncio.run(start_grpc_server(lambda: None, "127.0.0.1", port, 1 << 20))


def test_serve_refuses_a_taken_port_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas on one host both took the default 8001: the second printed the error
    inside uvicorn's 'Application startup failed' traceback, after starting its runtime pool."""
    monkeypatch.setenv("PTEFORGE_HOME", str(tmp_path))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            SystemExit, match=f"^pteforge serve: cannot listen for gRPC on 127.0.0.1:{port}"
        ):
            main(["serve", "--port", "0", "--grpc-port", str(port), "--no-workers"])


@pytest.mark.parametrize("declared", [(2_000_002,), (2,)])
def test_typed_contents_are_checked_before_they_become_python_values(
    declared: tuple[int, ...],
) -> None:
    """2M typed floats under a shape the signature refuses, or more values than the shape
    holds: refused without a Python list of them (``list(fp32_contents)`` was 1 GB for a
    120 MB message)."""
    request = _request(raw=False, memory_shape=declared)
    request.inputs[0].contents.fp32_contents.extend(np.zeros(2_000_000, dtype=np.float32))
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInputError, match="'memory': "):
            decode_request(request, SIG)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_unimplemented_rpcs_and_big_messages_get_clear_statuses() -> None:
    async def calls() -> list[tuple[grpc.StatusCode, str | None]]:
        port = free_port()
        server = await start_grpc_server(lambda: None, "127.0.0.1", port, 1 << 20)
        answers = []
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = rpc.GRPCInferenceServiceStub(channel)
            big = pb.ModelInferRequest(model_name="m", raw_input_contents=[b"\0" * (2 << 20)])
            unload = stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="m"))
            for call in (unload, stub.ModelInfer(big)):
                try:
                    await call
                except grpc.aio.AioRpcError as exc:
                    answers.append((exc.code(), exc.details()))
        await server.stop(0)
        return answers

    unload, big = asyncio.run(calls())
    assert unload[0] is grpc.StatusCode.UNIMPLEMENTED
    assert unload[1] is not None and unload[1].startswith(
        "inference.GRPCInferenceService/RepositoryModelUnload is not implemented by pteforge"
    )
    assert big[0] is grpc.StatusCode.RESOURCE_EXHAUSTED, big
