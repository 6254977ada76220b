"""XNNPACK's packed-weight cache, turned on through the C++ shim, shares packed weights."""

from __future__ import annotations

from pathlib import Path

from pteforge.runtime.memprobe import measure_second_method
from tests.runtime.helpers import Compiled

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
