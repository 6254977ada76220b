"""/v2: the compiled artifact served by the same service, driven by unmodified tritonclient."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest
import torch
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from tests.models import MultiMethod
from tests.runtime.helpers import triton_inputs
from tests.server.service import ServiceProcess


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
