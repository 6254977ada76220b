"""A bfloat16 method over /v2, HTTP binary and gRPC raw, through unmodified tritonclient:
BF16 tensors in ml_dtypes' bfloat16 (as tritonclient holds them), answered as eager PyTorch
answers the same bf16 inputs, and BF16 in the model's metadata."""

from __future__ import annotations

import httpx
import ml_dtypes
import numpy as np
import pytest
import torch
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from torch import nn

from pteforge.client import Client
from tests.models import save_programs
from tests.server.helpers import compile_files
from tests.server.service import ServiceProcess

# XNNPACK leaves a bf16 Linear to the portable kernels here, so only the portable plan.
PLAN = {"all": {}}


@pytest.fixture(scope="module")
def bf16(admin: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    """The /v2 model name of a bf16 MLP compiled without delegation, and what eager PyTorch
    answers for ``_inputs()`` (as ml_dtypes' bfloat16)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4)).bfloat16().eval()
    x = torch.from_numpy(_inputs().view(np.int16)).view(torch.bfloat16)
    program = torch.export.export(model, (x,))
    files = save_programs({"forward": program}, tmp_path_factory.mktemp("bf16"))
    with torch.no_grad():
        expected = model(x).view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return f"{compile_files(admin, files, 'bf16', PLAN)}.forward", expected


def _inputs() -> np.ndarray:
    return np.linspace(-2, 2, 16, dtype=np.float32).reshape(2, 8).astype(ml_dtypes.bfloat16)


def _assert_close(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal within bf16 rounding: a kernel may round its sums once more or less."""
    assert got.dtype == ml_dtypes.bfloat16 and got.shape == expected.shape
    np.testing.assert_allclose(
        got.astype(np.float32), expected.astype(np.float32), rtol=2**-7, atol=2**-7
    )


def test_bf16_over_http_binary(
    service: ServiceProcess, admin: httpx.Client, bf16: tuple[str, np.ndarray]
) -> None:
    model, expected = bf16
    token = {"Authorization": str(admin.headers["Authorization"])}
    client = triton_http.InferenceServerClient(url=service.url.removeprefix("http://"))
    metadata = client.get_model_metadata(model, headers=dict(token))
    assert [t["datatype"] for t in metadata["inputs"] + metadata["outputs"]] == ["BF16", "BF16"]
    entry = triton_http.InferInput(metadata["inputs"][0]["name"], [2, 8], "BF16")
    entry.set_data_from_numpy(_inputs(), binary_data=True)
    wanted = triton_http.InferRequestedOutput(metadata["outputs"][0]["name"], binary_data=True)
    result = client.infer(model, [entry], outputs=[wanted], headers=dict(token))
    _assert_close(result.as_numpy(metadata["outputs"][0]["name"]), expected)
    head = {"inputs": [{"name": entry.name(), "datatype": "BF16", "shape": [2, 8],
                        "parameters": {"binary_data_size": 30}}]}  # fmt: skip
    header = httpx.Request("POST", "/", json=head).content
    short = admin.post(
        f"/v2/models/{model}/infer",
        content=header + b"\0" * 30,
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert short.status_code == 400, short.text
    assert short.json()["error"].endswith(
        "binary_data_size is 30, shape [2, 8] of bfloat16 needs 32 bytes"
    )


def test_bf16_over_grpc_raw(
    service: ServiceProcess, admin: httpx.Client, bf16: tuple[str, np.ndarray]
) -> None:
    model, expected = bf16
    token = {"authorization": str(admin.headers["Authorization"])}
    with triton_grpc.InferenceServerClient(f"127.0.0.1:{service.grpc_port}") as client:
        metadata = client.get_model_metadata(model, headers=token, as_json=True)
        assert [t["datatype"] for t in metadata["inputs"] + metadata["outputs"]] == ["BF16"] * 2
        entry = triton_grpc.InferInput(metadata["inputs"][0]["name"], [2, 8], "BF16")
        entry.set_data_from_numpy(_inputs())  # raw_input_contents
        result = client.infer(model, [entry], headers=token)
        _assert_close(result.as_numpy(metadata["outputs"][0]["name"]), expected)


def test_bf16_through_pteforge_client(
    service: ServiceProcess, bf16: tuple[str, np.ndarray]
) -> None:
    """``pteforge.client`` takes a torch bfloat16 tensor (or an ml_dtypes array) and answers
    BF16 as ml_dtypes' bfloat16, as tritonclient does."""
    model, expected = bf16
    artifact, method = model.split(".")
    x = torch.from_numpy(_inputs().view(np.int16)).view(torch.bfloat16)
    with Client(service.url, service.admin_token) as client:
        for given in (x, _inputs()):
            (answer,) = client.infer(artifact, method, [given]).outputs.values()
            _assert_close(answer, expected)
