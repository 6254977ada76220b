"""Numerics of a compiled method against a reference: max abs/rel error and SQNR.

The relative error is normalised by the reference's largest magnitude
(``max|got - want| / max|want|``): an element-wise ratio is meaningless where the
reference is near zero, which random-weight activations often are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

PLANS: dict[str, dict[str, object]] = {
    "portable": {},
    "xnnpack": {"all": {"partitioners": ["xnnpack"]}},
    "xnnpack-int8": {
        "all": {"partitioners": ["xnnpack"], "quantize": "xnnpack_pt2e_int8_dynamic_per_channel"}
    },
    "openvino": {"all": {"partitioners": ["openvino"]}},
    "openvino-int8": {
        "all": {"partitioners": ["openvino"], "quantize": "xnnpack_pt2e_int8_dynamic_per_channel"}
    },
    "openvino-encode": {
        "all": {"partitioners": ["xnnpack"]},
        "methods": {"encode": {"partitioners": ["openvino"]}},
    },
}
"""The plans of the zoo, by the name the matrix shows. ``openvino`` is fp32 only: the entry
refuses int8, which ``openvino-int8`` shows (its cells hold the refusal). ``openvino-encode``
is the mixed plan of the encoder/decoder models (``encode`` on OpenVINO, ``decode`` on
XNNPACK), for those with an ``encode`` method."""

FP32_REL_TOLERANCE = 1e-4
INT8_SQNR_THRESHOLD_DB = 20.0


def is_quantized(plan: str) -> bool:
    """Whether ``plan`` (a ``PLANS`` key) quantizes: report SQNR rather than hold to 1e-4."""
    return "int8" in plan


@dataclass(frozen=True)
class Numerics:
    """Worst-case error of some outputs against their reference."""

    max_abs: float
    max_rel: float
    sqnr_db: float

    def within(self, quantized: bool) -> bool:
        """fp32: relative error <= 1e-4; int8: SQNR >= 20 dB."""
        if quantized:
            return self.sqnr_db >= INT8_SQNR_THRESHOLD_DB
        return self.max_rel <= FP32_REL_TOLERANCE

    def describe(self, quantized: bool) -> str:
        """``abs 1.2e-06 / rel 3.4e-07`` (fp32) or ``SQNR 31.2 dB`` (int8)."""
        if quantized:
            return f"SQNR {self.sqnr_db:.1f} dB"
        return f"abs {self.max_abs:.1e} / rel {self.max_rel:.1e}"


def _as_numpy(value: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().numpy().astype(np.float64)
    return np.asarray(value, dtype=np.float64)


def compare_one(got: torch.Tensor | np.ndarray, want: torch.Tensor | np.ndarray) -> Numerics:
    """Errors of one output; shapes must agree."""
    a, b = _as_numpy(got), _as_numpy(want)
    if a.shape != b.shape:
        raise AssertionError(f"shape {a.shape} != reference {b.shape}")
    error = a - b
    max_abs = float(np.abs(error).max()) if error.size else 0.0
    scale = float(np.abs(b).max()) if b.size else 0.0
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    noise = float(np.square(error).sum())
    signal = float(np.square(b).sum())
    sqnr = math.inf if noise == 0 else 10 * math.log10(max(signal, 1e-300) / noise)
    return Numerics(max_abs, max_rel, sqnr)


def compare(
    got: Sequence[torch.Tensor | np.ndarray], want: Sequence[torch.Tensor | np.ndarray]
) -> Numerics:
    """The worst errors (largest abs/rel, lowest SQNR) over paired outputs."""
    if len(got) != len(want):
        raise AssertionError(f"{len(got)} outputs, the reference has {len(want)}")
    each = [compare_one(g, w) for g, w in zip(got, want, strict=True)]
    return worst(each)


def worst(each: Sequence[Numerics]) -> Numerics:
    """The worst of several comparisons (a perfect match if there are none)."""
    if not each:
        return Numerics(0.0, 0.0, math.inf)
    return Numerics(
        max(n.max_abs for n in each), max(n.max_rel for n in each), min(n.sqnr_db for n in each)
    )
