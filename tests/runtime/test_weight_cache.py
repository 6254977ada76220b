"""XNNPACK's packed-weight cache, turned on through the C++ shim, shares packed weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from pteforge.runtime import RuntimePool
from pteforge.runtime.memprobe import measure_second_method
from tests.models import MultiMethod
from tests.runtime.helpers import Compiled, compile_pte

SHARED_WEIGHT_BYTES = 2048 * 2048 * 4  # the 2048x2048 fp32 linear both methods use;
# 16 MiB keeps allocator and first-run noise (about 1 MiB) well under the 10% bound


def test_second_method_reuses_packed_weights(
    artifacts: dict[str, Compiled], weight_cache_library: Path
) -> None:
    path = artifacts["shared"].path
    without = measure_second_method(path, "encode", "decode", None)
    with_cache = measure_second_method(path, "encode", "decode", weight_cache_library)
    assert with_cache["weight_cache"] and not without["weight_cache"]
    # without the cache the second method packs its own copy of the shared weight
    assert without["second_method_bytes"] > 0.5 * SHARED_WEIGHT_BYTES, without
    assert with_cache["second_method_bytes"] < 0.1 * SHARED_WEIGHT_BYTES, with_cache


def _linear(weight: torch.Tensor, path: Path) -> tuple[Compiled, torch.Tensor]:
    """A bias-free linear with ``weight``, lowered to XNNPACK, and an input for it."""
    layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False).eval()
    with torch.no_grad():
        layer.weight.copy_(weight)
    x = torch.randn(1, weight.shape[1])
    model = MultiMethod({"forward": torch.export.export(layer, (x,))}, {"forward": (x,)}, {})
    return compile_pte(model, path), x


def test_weights_of_equal_bytes_and_other_shapes_stay_apart(
    tmp_path: Path, weight_cache_library: Path
) -> None:
    """XNNPACK keys packed weights by the sha256 of their bytes: a [4, 8] weight with the
    bytes of an [8, 4] one loaded before, in another program, ran on its packing (issue:
    two tiny LMs drawn from one seed answered other tokens than eager PyTorch)."""
    torch.manual_seed(0)
    weight = torch.randn(8, 4)
    first, x1 = _linear(weight, tmp_path / "first.pte")
    second, x2 = _linear(weight.reshape(4, 8), tmp_path / "second.pte")
    with RuntimePool(
        1, 64 << 20, tmp_path / "cache", weight_cache_library=weight_cache_library
    ) as pool:
        for compiled, x, w in ((first, x1, weight), (second, x2, weight.reshape(4, 8))):
            (out,) = pool.infer(compiled.sha256, "forward", [x.numpy()], compiled.path).outputs
            np.testing.assert_allclose(out, (x @ w.T).numpy(), rtol=1e-5, atol=1e-5)
