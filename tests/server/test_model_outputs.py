"""A ``transformers`` model exported the direct way (keyword inputs, a ``ModelOutput`` out)
uploads, compiles and runs over ``/v2`` in a server that never imports ``transformers``."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import torch

from tests.server.helpers import submit, upload_methods, wait_job

VOCAB, SEQ = 100, 8


def _bert() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    import transformers  # imported when the model is built, not when tests are collected

    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    ids = torch.randint(1, VOCAB, (1, SEQ), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(1, SEQ, dtype=torch.long)
    mask[:, -2:] = 0
    return transformers.BertModel(config).eval(), {"input_ids": ids, "attention_mask": mask}


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
