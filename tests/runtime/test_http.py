"""/v2 over a real socket with unmodified tritonclient.http and KServe REST clients."""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest
import torch
import tritonclient.http as triton
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig
from tritonclient.utils import InferenceServerException

from pteforge.runtime import RuntimePool
from tests.runtime.conftest import Server
from tests.runtime.helpers import (
    Compiled,
    triton_inputs,
)


def auth() -> dict[str, str]:
    """Fresh headers per call: tritonclient and KServe add their own entries to the dict."""
    return {"Authorization": "Bearer tok-a"}


def _eager(compiled: Compiled, method: str) -> np.ndarray:
    with torch.no_grad():
        return compiled.model.eager[method](*compiled.model.inputs[method]).numpy()


def _triton(server: Server) -> triton.InferenceServerClient:
    return triton.InferenceServerClient(url=server.url.removeprefix("http://"))


def test_health_needs_no_token(server: Server) -> None:
    assert httpx.get(f"{server.url}/v2/health/live").json() == {"live": True}
    assert httpx.get(f"{server.url}/v2/health/ready").json() == {"ready": True}
    client = _triton(server)
    assert client.is_server_live() and client.is_server_ready()


def test_metadata_through_tritonclient(server: Server) -> None:
    client = _triton(server)
    assert "binary_tensor_data" in client.get_server_metadata(headers=auth())["extensions"]
    meta = client.get_model_metadata("s2s.decode", headers=auth())
    assert meta["inputs"] == [
        {"name": "input_0", "datatype": "INT64", "shape": [1, 4]},
        {"name": "input_1", "datatype": "FP32", "shape": [1, 8, 32]},
    ]
    assert meta["outputs"] == [{"name": "output_0", "datatype": "FP32", "shape": [1, 4, 64]}]
    assert client.is_model_ready("s2s.encode", headers=auth())


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize(("model", "name", "method"), [("mlp", "mlp", "forward"),
                                                       ("s2s", "seq2seq", "decode")])  # fmt: skip
def test_tritonclient_infer(
    server: Server,
    artifacts: dict[str, Compiled],
    binary: bool,
    model: str,
    name: str,
    method: str,
) -> None:
    compiled = artifacts[name]
    result = _triton(server).infer(
        f"{model}.{method}",
        triton_inputs(compiled.model, method, binary),
        outputs=[triton.InferRequestedOutput("output_0", binary_data=binary)],
        headers=auth(),
    )
    np.testing.assert_allclose(
        result.as_numpy("output_0"), _eager(compiled, method), rtol=1e-4, atol=1e-4
    )
    parameters = result.get_response()["parameters"]
    assert {"queue_ms", "load_ms", "execute_ms", "cache_hit"} <= set(parameters)


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_compressed_requests(
    server: Server, artifacts: dict[str, Compiled], compression: str
) -> None:
    compiled = artifacts["mlp"]
    result = _triton(server).infer(
        "mlp.forward",
        triton_inputs(compiled.model, "forward", True),
        headers=auth(),
        request_compression_algorithm=compression,
    )
    np.testing.assert_allclose(
        result.as_numpy("output_0"), _eager(compiled, "forward"), rtol=1e-4, atol=1e-4
    )


def test_artifact_is_materialized_once(
    server: Server, pool: RuntimePool, artifacts: dict[str, Compiled]
) -> None:
    pool.files.drop(artifacts["mlp"].sha256)  # another test may have copied the same bytes
    before = server.resolver.materialized
    client = _triton(server)
    for _ in range(3):
        client.infer(
            "mlp.forward", triton_inputs(artifacts["mlp"].model, "forward", True), headers=auth()
        )
    assert server.resolver.materialized == before + 1


@pytest.mark.parametrize("binary", [False, True])
def test_kserve_rest_client_infer(
    server: Server, artifacts: dict[str, Compiled], binary: bool
) -> None:
    compiled = artifacts["seq2seq"]
    inputs = []
    for i, tensor in enumerate(compiled.model.inputs["decode"]):
        array = tensor.numpy()
        datatype = "INT64" if array.dtype == np.int64 else "FP32"
        entry = InferInput(f"input_{i}", list(array.shape), datatype)
        entry.set_data_from_numpy(array, binary_data=binary)
        inputs.append(entry)

    async def call() -> np.ndarray:
        client = InferenceRESTClient(RESTConfig(protocol="v2"))
        try:
            response = await client.infer(
                server.url, InferRequest("s2s.decode", inputs), model_name="s2s.decode",
                headers=auth(),
            )  # fmt: skip
        finally:
            await client.close()
        return np.asarray(response.outputs[0].as_numpy())

    output = asyncio.run(call())
    np.testing.assert_allclose(output, _eager(compiled, "decode"), rtol=1e-4, atol=1e-4)


def test_kserve_rest_client_reusing_its_headers_hears_why(
    server: Server, artifacts: dict[str, Compiled]
) -> None:
    """KServe's client writes a binary call's header length into the dict it is given: a
    later JSON call with that dict sends a stale length, and the 400 says what to do."""
    array = artifacts["mlp"].model.inputs["forward"][0].numpy()

    def request(binary: bool) -> InferRequest:
        entry = InferInput("input_0", list(array.shape), "FP32")
        entry.set_data_from_numpy(array, binary_data=binary)
        return InferRequest("mlp.forward", [entry])

    async def two_calls(headers: dict[str, str]) -> None:
        client = InferenceRESTClient(RESTConfig(protocol="v2"))
        try:
            for binary in (True, False):
                await client.infer(server.url, request(binary), "mlp.forward", headers)
        finally:
            await client.close()

    with pytest.raises(httpx.HTTPStatusError, match="KServe's InferenceRESTClient write") as err:
        asyncio.run(two_calls(auth()))
    assert err.value.response.status_code == 400


def _post(server: Server, model: str, inputs: list[dict[str, object]]) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v2/models/{model}/infer", json={"inputs": inputs}, headers=auth()
    )


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([], "expects 1 input(s) (input_0), got 0"),
        ([{"name": "input_0", "datatype": "INT64", "shape": [1, 16], "data": [0] * 16}],
         "input 'input_0': expected datatype FP32, got INT64"),
        ([{"name": "input_0", "datatype": "FP32", "shape": [2, 16], "data": [0] * 32}],
         "input 'input_0': expected shape [1, 16], got [2, 16]"),
    ],
)  # fmt: skip
def test_bad_inputs_get_400_naming_the_input(
    server: Server, inputs: list[dict[str, object]], message: str
) -> None:
    response = _post(server, "mlp.forward", inputs)
    assert response.status_code == 400
    assert message in response.json()["error"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"parameters": [1]}, "the request: 'parameters' must be an object, got [1]"),
        ({"outputs": [{"name": "output_0", "parameters": {"shared_memory_region": "o"}}]},
         "output 'output_0': 'shared_memory_region': shared memory is not supported"),
        ({"outputs": [{"name": "output_0"}] * 300},  # was 300 copies of the output
         "output 'output_0' is asked for more than once"),
    ],
)  # fmt: skip
def test_bad_parameters_and_outputs_get_400(
    server: Server, extra: dict[str, object], message: str
) -> None:
    """The first was a 500 (AttributeError); the second answered in the body while the
    client read its shared-memory region; the third sent the output 300 times (attack
    pass)."""
    tensor = {"name": "input_0", "datatype": "FP32", "shape": [1, 16], "data": [0] * 16}
    body = {"inputs": [tensor], **extra}
    response = httpx.post(f"{server.url}/v2/models/mlp.forward/infer", json=body, headers=auth())
    assert response.status_code == 400 and response.json()["error"].startswith(message)


def test_tritonclient_sees_the_400_message(server: Server, artifacts: dict[str, Compiled]) -> None:
    entry = triton.InferInput("input_0", [1, 8], "FP32")
    entry.set_data_from_numpy(np.zeros((1, 8), np.float32))
    with pytest.raises(InferenceServerException, match=r"expected shape \[1, 16\], got \[1, 8\]"):
        _triton(server).infer("mlp.forward", [entry], headers=auth())


def test_other_projects_and_unknown_models_are_404(server: Server) -> None:
    other = {"Authorization": "Bearer tok-b"}
    assert httpx.get(f"{server.url}/v2/models/mlp.forward", headers=other).status_code == 404
    assert httpx.get(f"{server.url}/v2/models/other.forward", headers=auth()).status_code == 404
    missing = httpx.get(f"{server.url}/v2/models/mlp.backward", headers=auth())
    assert missing.status_code == 404 and "backward" in missing.json()["error"]
    long = httpx.get(f"{server.url}/v2/models/{'a' * 20_000}.forward", headers=auth())
    assert long.status_code == 404 and len(long.text) < 1000  # the name is echoed cut
    assert httpx.get(f"{server.url}/v2/models/mlp.forward").status_code == 401


def test_profile_mode_returns_etdump_times(server: Server, artifacts: dict[str, Compiled]) -> None:
    result = _triton(server).infer(
        "s2s.encode",
        triton_inputs(artifacts["seq2seq"].model, "encode", True),
        headers=auth(),
        parameters={"profile": True},
    )
    profile = json.loads(result.get_response()["parameters"]["profile"])
    assert profile["delegate_calls"] and profile["operators"]


def test_metrics(server: Server, artifacts: dict[str, Compiled]) -> None:
    _triton(server).infer("mlp.forward", triton_inputs(artifacts["mlp"].model, "forward", True),
                          headers=auth())  # fmt: skip
    text = httpx.get(f"{server.url}/metrics").text
    assert 'pteforge_v2_requests_total{code="200",route="infer"}' in text
    assert "pteforge_v2_infer_seconds_bucket" in text
    assert "pteforge_runtime_cache_hits_total" in text
    assert "pteforge_runtime_worker_restarts_total" in text
    assert "pteforge_runtime_xnnpack_weight_cache 1.0" in text


def test_a_crashing_artifact_fails_only_its_request(
    server: Server, artifacts: dict[str, Compiled]
) -> None:
    restarts = _metric(server, "pteforge_runtime_worker_restarts_total")
    body = {"inputs": [{"name": "input_0", "datatype": "FP32", "shape": [1, 16],
                        "data": [0.0] * 16}]}  # fmt: skip
    crashed = httpx.post(f"{server.url}/v2/models/crash.forward/infer", json=body, headers=auth())
    # retried once on another worker, it crashes that one too: the input's fault, a 4xx
    assert crashed.status_code == 422
    assert "crashed the runtime twice" in crashed.json()["error"]
    assert "method 'forward'" in crashed.json()["error"]
    after = httpx.post(f"{server.url}/v2/models/mlp.forward/infer", json=body, headers=auth())
    assert after.status_code == 200
    assert _metric(server, "pteforge_runtime_worker_restarts_total") == restarts + 2


def _metric(server: Server, name: str) -> float:
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"metric {name} not found")
