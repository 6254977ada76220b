"""A language-model artifact says so: ``generation`` carries what its runner metadata methods
answered (an uploaded ``.pte``: read in the sandbox child that verifies it; a compiled one:
the plan's ``constant_methods``)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import torch

from tests.generation import lm_export
from tests.generation.lm_builder import build_tiny_lm
from tests.server.helpers import compile_files
from tests.server.model_names import scale_pte

pytestmark = pytest.mark.zoo


def test_uploaded_lm_is_described(admin: httpx.Client) -> None:
    lm = build_tiny_lm("llama")
    pte = lm.pte.read_bytes()
    created = admin.post("/v1/artifacts", files={"pte": ("lm.pte", pte)}).raise_for_status()
    artifact = admin.get(f"/v1/artifacts/{created.json()['id']}").raise_for_status().json()
    assert artifact["generation"] == created.json()["generation"]
    generation = artifact["generation"]
    assert generation["convention"] == "executorch_llm_runner"
    assert generation["method"] == "forward"
    assert generation["max_seq_len"] == lm.max_seq_len
    assert (generation["bos_id"], generation["eos_ids"]) == (lm.bos_id, lm.eos_ids)
    assert generation["metadata"] == lm.metadata
    assert artifact["report"] == {"source": "upload"}


def test_other_programs_have_no_generation(admin: httpx.Client) -> None:
    pte = scale_pte(2.0)
    created = admin.post("/v1/artifacts", files={"pte": ("scale.pte", pte)}).raise_for_status()
    assert created.json()["generation"] is None


def test_compiled_lm_is_described(admin: httpx.Client, tmp_path: Path) -> None:
    """The metadata come from the plan, whatever the lowering: the cheapest one (a static
    sequence length, as ``enable_dynamic_shape`` says, and the portable kernels) serves."""
    lm = build_tiny_lm("llama")
    archive = tmp_path / "forward.pt2"
    torch.export.save(lm_export.export_lm(lm.eager, lm.max_seq_len, dynamic=False), archive)
    constants = {**lm.metadata, "enable_dynamic_shape": False}
    plan = {"constant_methods": constants}
    artifact_id = compile_files(admin, {"forward": archive}, "tiny-llama", plan)
    artifact = admin.get(f"/v1/artifacts/{artifact_id}").raise_for_status().json()
    assert artifact["generation"]["metadata"] == constants
    assert artifact["generation"]["eos_ids"] == lm.eos_ids
    assert "generation" not in artifact["report"]
