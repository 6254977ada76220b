"""Attention kernels given tensors they read or write past, in a confined worker.

Upstream's ``custom_sdpa`` reads its caches at the query's batch unchecked (a query of
batch 2 over caches of 1 answered the buffer planned after them), ``custom_quantized_sdpa``
reads each scale at its zero point's offset (wider zero points read past the scales), and
``sdpa_with_kv_cache`` bounds its cache write by a ``seq_len`` argument but copies the
whole key (a heap corruption). So such methods do not run (``runtime/attention_shapes.py``),
while their well-shaped twins answer the caches' numbers.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from pteforge.runtime import ProgramLoadError, RuntimePool
from pteforge.runtime.kernel_guards import kernel_guards
from tests.runtime import attention_programs as attn

Q = torch.ones(2, 1, 2, 4)
Q8 = torch.ones(1, 1, 2, 4, dtype=torch.int8)
HOSTILE = {
    "query_batch": (attn.CachedAttention(1), (Q,), "llama::custom_sdpa", "a larger batch"),
    "qparams": (
        attn.QuantizedAttention(64), (Q8,), "llama::custom_quantized_sdpa",
        "q zero points and scales differ in shape",
    ),
    "seq_len": (
        attn.ShortSeqLen(), (Q[:1], torch.ones(1, 4, 2, 4)), "llama::sdpa_with_kv_cache",
        "copies the whole key and value",
    ),
}  # fmt: skip


def _infer(pool: RuntimePool, path: Path, inputs: tuple[torch.Tensor, ...]) -> np.ndarray:
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    return pool.infer(sha256, "forward", [t.numpy() for t in inputs], path).outputs[0]


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_shapes_a_kernel_reads_or_writes_past_are_refused(
    kind: str, pool: RuntimePool, tmp_path: Path
) -> None:
    """Unguarded, each answers another tensor's bytes or corrupts the worker's heap."""
    model, inputs, operator, why = HOSTILE[kind]
    path = attn.build(model, inputs, tmp_path / f"{kind}.pte")
    refused = kernel_guards(path).refused["forward"]
    assert refused.startswith(f"it calls {operator}, and ") and why in refused, refused
    with pytest.raises(ProgramLoadError, match=f"cannot run here: it calls {operator}"):
        _infer(pool, path, inputs)


def test_caches_holding_the_querys_batch_run(pool: RuntimePool, tmp_path: Path) -> None:
    path = attn.build(attn.CachedAttention(2), (Q,), tmp_path / "batch2.pte")
    assert kernel_guards(path).refused == {}
    assert _infer(pool, path, (Q,)).tolist() == np.full((2, 1, 2, 4), 3.0).tolist()


def test_one_zero_point_and_scale_per_row_run(pool: RuntimePool, tmp_path: Path) -> None:
    path = attn.build(attn.QuantizedAttention(1), (Q8,), tmp_path / "quantized.pte")
    assert kernel_guards(path).refused == {}
    assert _infer(pool, path, (Q8,)).tolist() == np.ones((1, 1, 2, 4)).tolist()


def test_a_query_batch_known_only_at_run_time_is_refused(pool: RuntimePool, tmp_path: Path) -> None:
    """Planned as batch 1 but viewed to one row per position: unguarded, positions 2
    answered the buffer planned after the caches (ExecuTorch bounds a dynamic tensor's
    elements, not each dimension)."""
    exported = attn.build(attn.ViewedQuery(True), (torch.ones(1, 8, 8),), tmp_path / "view.pte")
    planned = tmp_path / "planned.pte"
    path = attn.with_argument_planned(exported, "llama::custom_sdpa", 0, [1, 8, 2, 4], planned)
    refused = kernel_guards(path).refused["forward"]
    assert "may have a larger batch than its key [1, 8, 2, 4]" in refused, refused
    with pytest.raises(ProgramLoadError, match="cannot run here: it calls llama::custom_sdpa"):
        _infer(pool, path, (torch.ones(1, 2, 8),))


def test_a_dynamic_query_viewed_to_a_constant_batch_runs(pool: RuntimePool, tmp_path: Path) -> None:
    """As ``export_llama``'s query: viewed to batch 1 and a dynamic number of positions."""
    path = attn.build(attn.ViewedQuery(False), (torch.ones(1, 8, 8),), tmp_path / "good.pte")
    assert kernel_guards(path).refused == {}
    assert (
        _infer(pool, path, (torch.ones(1, 2, 8),)).tolist() == np.full((1, 2, 2, 4), 3.0).tolist()
    )


def test_query_zero_points_the_method_computes_are_refused(tmp_path: Path) -> None:
    """Planned as one per row, but computed, so they may be resized wider at run time
    while their scales stay one per row (the kernel reads scales at the zeros' offsets)."""
    inputs = (Q8, torch.zeros(1, 1, 2, 2, dtype=torch.int8))
    exported = attn.build(attn.ComputedQueryZeros(), inputs, tmp_path / "zeros.pte")
    operator = "llama::custom_quantized_sdpa"
    path = attn.with_argument_planned(exported, operator, 8, [1, 1, 2, 1], tmp_path / "p.pte")
    assert kernel_guards(path).refused["forward"] == (
        f"it calls {operator}, and its q zero points or scales may be resized past one per row"
    )


def test_caches_sliced_alike_run(pool: RuntimePool, tmp_path: Path) -> None:
    """A query normalized and rotated after its view keeps its batch, and the same slice of
    key and value is as safe as the whole caches; a key sliced shorter
    than its value would be read past its end (the kernel takes the positions from the
    value's)."""
    inputs = (torch.ones(1, 2, 8), torch.tensor([3]))
    path = attn.build(attn.SlicedCaches(), inputs, tmp_path / "sliced.pte")
    assert kernel_guards(path).refused == {}
    assert _infer(pool, path, inputs).tolist() == np.full((1, 2, 2, 4), 3.0).tolist()
    longer = attn.with_value_sliced_to(path, attn.CACHE_LEN, tmp_path / "longer.pte")
    assert (
        kernel_guards(longer)
        .refused["forward"]
        .endswith(
            "its key may hold fewer positions than its value when run, which its kernel trusts"
        )
    )


def test_a_query_batch_a_delegate_sets_is_refused_naming_the_delegate(tmp_path: Path) -> None:
    """optimum-executorch's ``--use_custom_sdpa`` programs take the query from an XNNPACK
    delegate, whose output shapes a hostile blob sets: refused, saying what to export
    instead; the same attention on portable kernels runs."""
    x = (torch.ones(1, 2, 8),)
    delegated = attn.build(attn.ScaledQuery(), x, tmp_path / "delegated.pte", xnnpack=True)
    refused = kernel_guards(delegated).refused["forward"]
    assert "the query's batch, which a delegate's output sets" in refused, refused
    assert "--use_custom_sdpa" in refused, refused
    assert kernel_guards(attn.build(attn.ScaledQuery(), x, tmp_path / "portable.pte")).refused == {}
