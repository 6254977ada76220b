"""An uploaded language-model ``.pte`` says so on its artifact: ``generation`` carries what
its runner metadata methods answered (read in the sandbox child that verifies it)."""

from __future__ import annotations

import httpx
import pytest

from tests.generation.lm_builder import build_tiny_lm
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
