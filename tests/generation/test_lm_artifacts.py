"""A ``.pte`` in ExecuTorch's LLM runner convention is described as one (``generation``):
the sandbox child that verifies an upload reads its metadata methods."""

from __future__ import annotations

import pytest

from pteforge.contracts.llm_runner import RUNNER_METADATA
from pteforge.server.sandbox import validate_pte_isolated
from tests.generation.lm_builder import FAMILIES, build_tiny_lm

pytestmark = pytest.mark.zoo


@pytest.mark.parametrize("family", FAMILIES)
def test_sandbox_reads_the_runner_metadata(family: str) -> None:
    lm = build_tiny_lm(family)  # type: ignore[arg-type]
    described = validate_pte_isolated(lm.pte)
    info = described.generation
    assert info is not None and info.method == "forward"
    assert (info.max_seq_len, info.bos_id, info.eos_ids) == (64, lm.bos_id, lm.eos_ids)
    assert (info.vocab_size, info.use_kv_cache, info.enable_dynamic_shape) == (384, True, True)
    assert info.metadata == lm.metadata and set(info.metadata) == set(RUNNER_METADATA) - {
        "get_eos_id"
    }
    assert "generation" in described.to_json()
