"""KV-cache writes at positions no input check bounds, in a confined worker.

Upstream's ``llama::update_cache`` does not check that its position is not negative, and
writes before the cache there. pteforge refuses negative integer inputs of a method calling
it, which bounds the position only when the kernel gets an element of an ``int64`` input
unchanged (as ``export_llama`` programs do): a method that computes its position, narrows
it, or writes at a negative constant does not run at all (``runtime/argument_sources.py``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from pteforge.runtime import ProgramLoadError, RuntimePool
from pteforge.runtime.kernel_guards import kernel_guards
from tests.security import kv_cache_program as kv

REFUSED = {
    "shifted": "its position is computed by the method, not read from an input",
    "narrowed": "its position is read from an input through a narrower integer type",
}


def _run(pool: RuntimePool, path: Path, position: int) -> np.ndarray:
    q = torch.ones(kv.SHAPE).numpy()
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    result = pool.infer(sha256, "forward", [q, q, q, np.array([position])], path)
    return result.outputs[0]


def test_positions_read_from_an_input_unchanged_run(tmp_path: Path) -> None:
    guards = kernel_guards(kv.build(tmp_path / "kv.pte"))
    assert guards.positions == {"forward", "attend"} and guards.refused == {}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_position_no_input_check_bounds_is_refused(
    kind: str, pool: RuntimePool, tmp_path: Path
) -> None:
    """Each would write before the cache at an input the check lets through (0; 2**32 - 1)."""
    path = kv.build_writer(kind, tmp_path / f"{kind}.pte")
    refused = kernel_guards(path).refused["forward"]
    assert refused.startswith("it calls llama::update_cache, whose kernel writes before its")
    assert refused.endswith(REFUSED[kind]), refused
    with pytest.raises(ProgramLoadError, match="cannot run here: it calls llama::update_cache"):
        _run(pool, path, 1)


def test_a_constant_position_is_checked_in_the_program(pool: RuntimePool, tmp_path: Path) -> None:
    path = kv.build_writer("constant", tmp_path / "constant.pte")
    assert kernel_guards(path).refused == {}
    written = _run(pool, path, 0).reshape(1, kv.CACHE_LEN, -1)
    assert written[0, 3].tolist() == [1.0] * 8 and written[0, :3].sum() == 0
    negative = kv.with_constant_position(path, -1, tmp_path / "negative.pte")
    assert kernel_guards(negative).refused["forward"].endswith("its position is the constant -1")
    with pytest.raises(ProgramLoadError, match="cannot run here"):
        _run(pool, negative, 0)


@pytest.mark.zoo
@pytest.mark.parametrize("quantization", [None, "8da4w"])
def test_export_llama_programs_run(quantization: str | None) -> None:
    """Upstream's LLM export reads each layer's position from ``input_pos`` unchanged."""
    from tests.generation.lm_upstream import build_upstream_llama

    guards = kernel_guards(build_upstream_llama(quantization=quantization).pte)
    assert guards.positions == {"forward"} and guards.refused == {}
