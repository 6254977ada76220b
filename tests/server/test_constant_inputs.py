"""A program exported with non-tensor keyword arguments (``scale=3.0, flag=False``, as
``use_cache=False`` with a ``transformers`` model): torch.export makes them inputs holding a
constant, which pteforge fills in. Clients send only the tensors: ``/v2`` metadata lists
them alone, ``/v1`` shows the constants apart, and the answer is eager's."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import torch

from tests.server.helpers import submit, upload_methods, wait_job


class Scaled(torch.nn.Module):
    def forward(self, x: torch.Tensor, scale: float = 2.0, flag: bool = True) -> torch.Tensor:
        y = x * scale
        return y + 1 if flag else y - 1


CONSTANTS = {"scale": 3.0, "flag": False}


def test_constant_keywords_are_filled_in_not_asked(admin: httpx.Client, tmp_path: Path) -> None:
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    torch.export.save(torch.export.export(Scaled(), (x,), CONSTANTS), tmp_path / "scaled.pt2")
    uploaded = upload_methods(admin, {"forward": tmp_path / "scaled.pt2"}, name="scaled")
    done = wait_job(admin, submit(admin, uploaded["id"], {})["id"])
    assert done["status"] == "succeeded", done
    artifact = admin.get(f"/v1/artifacts/{done['artifact_id']}").raise_for_status().json()
    assert artifact["numerics"]["methods"]["forward"]["status"] == "passed"
    (method,) = artifact["methods"]
    assert [i["name"] for i in method["inputs"]] == ["x"]
    assert method["constants"] == [
        {"index": 1, "name": "scale", "value": 3.0},
        {"index": 2, "name": "flag", "value": False},
    ]

    name = f"{done['artifact_id']}.forward"
    metadata = admin.get(f"/v2/models/{name}").raise_for_status().json()
    assert [(i["name"], i["datatype"]) for i in metadata["inputs"]] == [("x", "FP32")]
    tensor = {"name": "x", "datatype": "FP32", "shape": [2, 3], "data": x.flatten().tolist()}
    answer = admin.post(f"/v2/models/{name}/infer", json={"inputs": [tensor]})
    assert answer.status_code == 200, answer.text
    (output,) = answer.json()["outputs"]
    want = Scaled()(x, **CONSTANTS).numpy()
    np.testing.assert_allclose(np.reshape(output["data"], want.shape), want, rtol=1e-6)
    profiled = {"inputs": [tensor], "parameters": {"profile": True}}
    answer = admin.post(f"/v2/models/{name}/infer", json=profiled)
    assert answer.status_code == 200, answer.text
    assert "profile" in answer.json()["parameters"]
    _bundle_and_profile_run(admin, done["artifact_id"])


def _bundle_and_profile_run(admin: httpx.Client, artifact_id: str) -> None:
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    bpte = admin.get(f"/v1/artifacts/{artifact_id}/bpte")
    assert bpte.status_code == 200, bpte.text
    bundle = _load_bundled_program_from_buffer(bpte.content)
    bundle.verify_result_with_bundled_expected_output("forward", 0, 1e-3, 1e-4)
    body = {"artifact_id": artifact_id, "method": "forward", "iterations": 3}
    job = admin.post("/v1/profile-jobs", json=body)
    assert job.status_code == 202, job.text
    done = wait_job(admin, job.json()["id"])
    assert done["status"] == "succeeded", done  # on the numerics check's inputs
