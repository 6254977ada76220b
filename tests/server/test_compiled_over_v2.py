"""/v2: the compiled artifact served by the same service, driven by unmodified tritonclient:
infer, metadata and Triton's model configuration extension, over HTTP and gRPC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton
from tritonclient.grpc import model_config_pb2
from tritonclient.utils import InferenceServerException

from tests.models import MultiMethod, save_programs
from tests.runtime.helpers import triton_inputs
from tests.server.helpers import compile_files
from tests.server.model_names import deploy
from tests.server.service import ServiceProcess


class _Masked(torch.nn.Module):
    """A BERT-style pair of inputs, ``input_ids`` and ``attention_mask``, of one length."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return (input_ids * attention_mask).sum(dim=1)


class _Scaled(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


@pytest.fixture(scope="module")
def masked(admin: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``_Masked`` exported with one ``Dim("seq", min=4, max=64)`` for both inputs, compiled
    without delegation; its ``/v2`` model name."""
    seq = torch.export.Dim("seq", min=4, max=64)
    ids = torch.ones(1, 8, dtype=torch.int64)
    program = torch.export.export(_Masked(), (ids, ids), dynamic_shapes=({1: seq}, {1: seq}))
    files = save_programs({"forward": program}, tmp_path_factory.mktemp("masked"))
    return f"{compile_files(admin, files, 'masked', {})}.forward"


def _masked_infer(admin: httpx.Client, model: str, ids: int, mask: int) -> httpx.Response:
    inputs = [
        {"name": name, "datatype": "INT64", "shape": [1, n], "data": [2] * n}
        for name, n in (("input_ids", ids), ("attention_mask", mask))
    ]
    return admin.post(f"/v2/models/{model}/infer", json={"inputs": inputs})


@pytest.mark.parametrize("method", ["encode", "decode"])
def test_v2_infer_matches_eager(
    service: ServiceProcess,
    admin: httpx.Client,
    compiled: dict[str, Any],
    seq2seq: MultiMethod,
    method: str,
) -> None:
    token = {"Authorization": admin.headers["Authorization"]}
    client = triton.InferenceServerClient(url=service.url.removeprefix("http://"))
    model = f"{compiled['artifact']['id']}.{method}"
    assert client.is_model_ready(model, headers=dict(token))
    metadata = client.get_model_metadata(model, headers=dict(token))
    names = [t["name"] for t in metadata["inputs"]]
    outputs = [t["name"] for t in metadata["outputs"]]
    # /v2 speaks the program's own names, the same ones /v1 shows for the artifact's method.
    (v1,) = [m for m in compiled["artifact"]["methods"] if m["name"] == method]
    assert names == [t["name"] for t in v1["inputs"]]
    assert outputs == [t["name"] for t in v1["outputs"]]
    assert not any(n.startswith("input_") for n in names), names
    inputs = triton_inputs(seq2seq, method, binary=True, names=names)
    result = client.infer(model, inputs, headers=dict(token))
    with torch.no_grad():
        expected = seq2seq.eager[method](*seq2seq.inputs[method])
    expected = expected[0] if isinstance(expected, tuple) else expected
    np.testing.assert_allclose(result.as_numpy(outputs[0]), expected.numpy(), atol=1e-4, rtol=1e-4)


def test_v2_needs_a_token_and_hides_other_projects(
    service: ServiceProcess, compiled: dict[str, Any]
) -> None:
    other_project_token = service.create_token("v2-outsider", "v2-other-project")
    model = f"{compiled['artifact']['id']}.encode"
    assert httpx.get(f"{service.url}/v2/models/{model}").status_code == 401
    client = triton.InferenceServerClient(url=service.url.removeprefix("http://"))
    with pytest.raises(InferenceServerException):
        client.get_model_metadata(model, headers={"Authorization": f"Bearer {other_project_token}"})
    response = httpx.get(
        f"{service.url}/v2/models/{model}",
        headers={"Authorization": f"Bearer {other_project_token}"},
    )
    assert response.status_code == 404


def test_a_dynamic_size_below_the_exported_range_is_refused(
    admin: httpx.Client, masked: str
) -> None:
    """``seq`` was exported for 4..64: a length of 2 is a 400 naming the input, the
    dimension and the range, before it runs; 4 runs."""
    response = _masked_infer(admin, masked, 2, 2)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == (
        "input 'input_ids': dimension 1 is 2, outside the range 4..64 the program was "
        "exported with, got [1, 2]"
    )
    ok = _masked_infer(admin, masked, 4, 4).raise_for_status().json()
    assert ok["outputs"][0]["data"] == [16]


def test_dynamic_sizes_that_share_one_dim_must_agree(admin: httpx.Client, masked: str) -> None:
    """``input_ids`` and ``attention_mask`` share ``seq``: lengths 5 and 6 are a 400 naming
    both inputs."""
    response = _masked_infer(admin, masked, 5, 6)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == (
        "inputs 'input_ids' and 'attention_mask' must agree: dimension 1 of 'input_ids' is 5 "
        "and dimension 1 of 'attention_mask' is 6, one dynamic size in the program"
    )


def test_a_compile_only_artifact_is_not_ready(
    service: ServiceProcess, admin: httpx.Client, tmp_path: Path
) -> None:
    """A method delegated to Vulkan compiles here but cannot run: ready says not ready
    (tritonclient's ``is_model_ready`` is False), naming the backend, before any infer."""
    program = torch.export.export(_Scaled(), (torch.ones(2, 3),))
    files = save_programs({"forward": program}, tmp_path)
    plan = {"all": {"partitioners": ["vulkan"]}}
    model = f"{compile_files(admin, files, 'vulkan-only', plan)}.forward"
    response = admin.get(f"/v2/models/{model}/ready")
    assert response.status_code == 422, response.text
    assert response.json()["error"] == (
        f"model {model!r} is not ready: it is delegated to VulkanBackend, which this host's "
        "runtime cannot execute (a compile-only target: download the .pte for a device that "
        "has it)"
    )
    client = triton.InferenceServerClient(url=service.url.removeprefix("http://"))
    headers = {"Authorization": admin.headers["Authorization"]}
    assert not client.is_model_ready(model, headers=headers)
    with triton_grpc.InferenceServerClient(f"127.0.0.1:{service.grpc_port}") as over_grpc:
        assert not over_grpc.is_model_ready(
            model, headers={"authorization": headers["Authorization"]}
        )
    assert admin.get(f"/v2/models/{model}").status_code == 200  # its metadata still answers


def _config_matches_metadata(config: dict[str, Any], metadata: dict[str, Any]) -> None:
    """The model configuration describes the method as its metadata does, field by field."""
    assert config["platform"] == config["backend"] == "executorch"
    assert config["max_batch_size"] == 0
    for key, tensors in (("input", "inputs"), ("output", "outputs")):
        got = [(t["name"], t["data_type"], t["dims"]) for t in config[key]]
        want = [(t["name"], f"TYPE_{t['datatype']}", t["shape"]) for t in metadata[tensors]]
        assert got == want


def test_model_config_over_http_by_id_and_by_name(
    service: ServiceProcess, admin: httpx.Client, masked: str
) -> None:
    """``get_model_config`` of unmodified ``tritonclient.http``: the method's names, INT64
    and the dynamic ``seq`` as ``-1``; a model name's, latest and pinned, the same."""
    client = triton.InferenceServerClient(url=service.url.removeprefix("http://"))
    token = {"Authorization": admin.headers["Authorization"]}
    config = client.get_model_config(masked, headers=dict(token))
    assert config["name"] == masked
    assert [t["name"] for t in config["input"]] == ["input_ids", "attention_mask"]
    assert {t["data_type"] for t in config["input"]} == {"TYPE_INT64"}
    assert all(t["dims"][1] == -1 for t in config["input"])
    assert config["version_policy"] == {"specific": {"versions": [1]}}
    _config_matches_metadata(config, client.get_model_metadata(masked, headers=dict(token)))
    version = str(deploy(admin, "config-named", masked.removesuffix(".forward"))["version"])
    named = client.get_model_config("config-named.forward", version, headers=dict(token))
    assert named["name"] == "config-named.forward" and named["version_policy"] == {"all": {}}
    assert named["input"] == config["input"] and named["output"] == config["output"]
    assert client.get_model_config("config-named.forward", headers=dict(token)) == named


def test_model_config_over_grpc(service: ServiceProcess, admin: httpx.Client, masked: str) -> None:
    """gRPC ``ModelConfig`` answers the same configuration as HTTP's (one construction)."""
    headers = {"authorization": str(admin.headers["Authorization"])}
    over_http = admin.get(f"/v2/models/{masked}/config").raise_for_status().json()
    with triton_grpc.InferenceServerClient(f"127.0.0.1:{service.grpc_port}") as client:
        config = client.get_model_config(masked, headers=headers).config
    assert config.name == masked and config.platform == "executorch"
    assert config.max_batch_size == 0
    got = [
        (t.name, model_config_pb2.DataType.Name(t.data_type), list(t.dims)) for t in config.input
    ]
    assert got == [(t["name"], t["data_type"], t["dims"]) for t in over_http["input"]]
    assert [list(t.dims) for t in config.output] == [t["dims"] for t in over_http["output"]]


@pytest.mark.parametrize("whose", ["another project's", "missing"])
def test_model_config_of_a_model_the_caller_lacks_is_not_found(
    service: ServiceProcess, admin: httpx.Client, masked: str, whose: str
) -> None:
    """Another project's model is as absent as a missing one: 404 and NOT_FOUND."""
    if whose == "missing":
        model, token = "no-such-model.forward", str(admin.headers["Authorization"])
    else:
        model = masked
        token = f"Bearer {service.create_token('config-outsider', 'config-other-project')}"
    response = httpx.get(
        f"{service.url}/v2/models/{model}/config", headers={"Authorization": token}
    )
    assert response.status_code == 404 and "error" in response.json()
    grpc_client = triton_grpc.InferenceServerClient(f"127.0.0.1:{service.grpc_port}")
    with grpc_client, pytest.raises(InferenceServerException) as error:
        grpc_client.get_model_config(model, headers={"authorization": token})
    assert str(error.value.status()) == "StatusCode.NOT_FOUND"
