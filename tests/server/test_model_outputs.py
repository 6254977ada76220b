"""A ``transformers`` model exported the direct way (keyword inputs, a ``ModelOutput`` out)
uploads, compiles and runs over ``/v2`` in a server that never imports ``transformers``."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import torch

from tests.sandbox.hf_models import ids_and_mask, tiny_encoder
from tests.server.helpers import submit, upload_methods, wait_job


def _bert() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    ids, mask = ids_and_mask()
    return tiny_encoder("Bert"), {"input_ids": ids, "attention_mask": mask}


def test_a_directly_exported_model_output_compiles_and_runs(
    admin: httpx.Client, tmp_path: Path
) -> None:
    model, inputs = _bert()
    program = torch.export.export(model, (), inputs)
    assert "ModelOutput" in str(type(model(**inputs)).__mro__)
    torch.export.save(program, tmp_path / "bert.pt2")
    uploaded = upload_methods(admin, {"forward": tmp_path / "bert.pt2"}, name="bert-direct")
    outputs = [o["name"] for o in uploaded["methods"][0]["outputs"]]
    done = wait_job(admin, submit(admin, uploaded["id"], {})["id"], timeout=600)
    assert done["status"] == "succeeded", done
    artifact = admin.get(f"/v1/artifacts/{done['artifact_id']}").raise_for_status().json()
    numerics = artifact["numerics"]["methods"]["forward"]
    assert numerics["status"] == "passed"
    assert [o["name"] for o in numerics["outputs"]] == outputs  # every leaf compared

    name = f"{done['artifact_id']}.forward"
    metadata = admin.get(f"/v2/models/{name}").raise_for_status().json()
    assert [i["name"] for i in metadata["inputs"]] == ["input_ids", "attention_mask"]
    assert [o["name"] for o in metadata["outputs"]] == outputs  # the graph's, as for a dict
    body = {
        "inputs": [
            {"name": k, "datatype": "INT64", "shape": list(v.shape), "data": v.flatten().tolist()}
            for k, v in inputs.items()
        ]
    }
    answer = admin.post(f"/v2/models/{name}/infer", json=body).raise_for_status().json()
    with torch.no_grad():
        expected = model(**inputs)
    for got, key in zip(answer["outputs"], ["last_hidden_state", "pooler_output"], strict=True):
        want = expected[key].numpy()
        assert got["shape"] == list(want.shape)
        np.testing.assert_allclose(np.reshape(got["data"], want.shape), want, atol=1e-5)
