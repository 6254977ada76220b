"""Input checks for upstream kernels that write out of bounds on some input values.

ExecuTorch 1.5.1's ``llama::update_cache`` (and ``llama::sdpa_with_kv_cache``, which calls
the same copy) checks ``start_pos < cache_len`` and ``start_pos + seq_len <= cache_len``
but not ``start_pos >= 0``: a negative position copies the new keys and values *before*
the cache buffer (measured on a cache of 8 positions: -1 corrupts the heap and the process
aborts in ``free``; -8 writes silently and the method answers NaN; -10**11 is a
segmentation fault; the byte offset is an ``int32``, so a write lands within 2 GiB of the
cache, wrapped: -2**40 writes at position 0). The ``torch._check`` bounds that
``torch.export`` records on the position are dropped by ``to_executorch``, so nothing
between the request and the kernel refuses it.

A runtime worker holds other callers' programs and sessions, so corrupting its memory is
not the hostile caller's own business. In a method that calls one of these kernels, a
position comes from an integer input (``input_pos``, and token ids are never negative
either), so such a method's integer inputs must not hold negative values. A method whose
writing kernel gets a position it computes (``start - 1``), or one read from an input
anywhere but unchanged, is refused (``ProgramLoadError``: 422), as no input check bounds it
(:func:`argument_sources.position_hazard`).

Upstream's quantized embedding kernels (``quantized_decomposed::embedding_byte``,
``embedding_2bit``, ``embedding_4bit``, and their ``dtype`` overloads) look up rows of a
constant weight by an ``indices`` tensor. ``embedding_byte`` checks ``0 <= index < rows``
with ``ET_CHECK_MSG``, which aborts the whole worker; ``embedding_2bit`` and
``embedding_4bit`` do not check at all: an index past the weight (16 rows: 16, 17, -1,
+-10**6) answers the bytes found there, dequantized (an out-of-bounds read, whose output
returns another caller's memory), and 10**11 is a segmentation fault (measured on 1.5.1).
Where such a kernel's ``indices`` is a method input (directly, through a static view of it,
or through copies that keep its values: :data:`COPY_OPERATORS`), pteforge refuses values
outside ``[0, rows)``, the rows read from the weight's shape in the program. A method whose
``embedding_2bit``/``embedding_4bit`` indices no input check can bound (computed by the
method, or in memory something before the lookup writes: :mod:`argument_sources`), or a
program whose flatbuffer pteforge cannot read, is refused (``ProgramLoadError``: 422) rather
than run. So is a method whose attention kernel gets tensors whose shapes let it read or
write past them (:mod:`attention_shapes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.contracts.oip import is_float
from pteforge.runtime.argument_sources import method_hazards
from pteforge.runtime.attention_shapes import attention_hazard
from pteforge.runtime.errors import InvalidInputError, ProgramLoadError
from pteforge.runtime.metadata import (
    MALFORMED_FLATBUFFER,
    ProgramFlatbuffer,
    TensorSpec,
    program_table,
)

POSITION_OPERATORS = frozenset(
    {"llama::update_cache", "llama::sdpa_with_kv_cache", "llama::custom_sdpa"}
)
"""Operators taking a ``start_pos``: the first two write at a negative one unchecked;
``custom_sdpa`` alone stays in bounds there but answers NaN (no key is attended)."""

QPARAMS_OPERATORS = frozenset(
    {
        "quantized_decomposed::choose_qparams",
        "quantized_decomposed::choose_qparams_per_token_asymmetric",
    }
)
"""Dynamic quantization's scale, where a partitioner left it to the portable kernels: a NaN
fails their ``scale > 0`` check, which aborts the worker (and the sessions it holds)."""

EVERY_METHOD = frozenset({"*"})
"""``KernelGuards.positions`` of a program whose table cannot be read: which operators its
methods call is then unknown."""


def check_positions(
    guarded: frozenset[str], method: str, specs: Sequence[TensorSpec], arrays: Sequence[np.ndarray]
) -> None:
    """Raise unless ``method`` is unguarded or no integer input of it holds a negative
    value (call after the inputs were checked against the method's signature)."""
    if method not in guarded and "*" not in guarded:
        return
    for spec, array in zip(specs, arrays, strict=True):
        if np.issubdtype(array.dtype, np.signedinteger) and array.size and array.min() < 0:
            raise InvalidInputError(
                f"input {spec.name!r}: negative value {int(array.min())} refused: method "
                f"{method!r} calls upstream's llama:: KV-cache operators, whose kernels do not "
                "check that a position is not negative"
            )


@dataclass(frozen=True)
class KernelGuards:
    """What a program's methods must be checked for before they run: the methods refusing
    negative integer inputs (:data:`POSITION_OPERATORS`), per method each input that is a
    quantized embedding's indices with the rows of its (smallest) weight, and the methods
    that must not run at all, with why (:func:`argument_sources.method_hazards`)."""

    positions: frozenset[str] = frozenset()
    rows: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)
    finite: frozenset[str] = frozenset()  # methods refusing NaN and inf (QPARAMS_OPERATORS)


def kernel_guards(path: Path | ProgramFlatbuffer) -> KernelGuards:
    """The :class:`KernelGuards` of the ``.pte`` at ``path`` (read once, when loaded)."""
    try:
        plans = list(program_table(path).execution_plan)
        positions = _calling(plans, POSITION_OPERATORS)
        found = {str(plan.name): method_hazards(plan) for plan in plans}
        shapes = {str(plan.name): attention_hazard(plan) for plan in plans}
    except MALFORMED_FLATBUFFER:
        return KernelGuards(EVERY_METHOD, refused={"*": "its program table cannot be read"})
    rows = {name: bounds for name, (bounds, _) in found.items() if bounds}
    refused = {name: why for name, (_, why) in found.items() if why is not None}
    refused |= {name: why for name, why in shapes.items() if why and name not in refused}
    return KernelGuards(positions, rows, refused, _calling(plans, QPARAMS_OPERATORS))


def _calling(plans: list[Any], operators: frozenset[str]) -> frozenset[str]:
    """The names of the plans that call one of ``operators``."""
    return frozenset(
        str(plan.name) for plan in plans if any(op.name in operators for op in plan.operators)
    )


def check_inputs(
    guards: KernelGuards, method: str, specs: Sequence[TensorSpec], arrays: Sequence[np.ndarray]
) -> None:
    """Raise if an input of ``method`` holds a value its kernels do not check and must not
    see (call after the inputs were checked against the method's signature)."""
    _check_runnable(guards, method)
    check_positions(guards.positions, method, specs, arrays)
    if method in guards.finite:
        _check_finite(method, specs, arrays)
    bounds = guards.rows.get(method)
    if not bounds:
        return
    for spec, array in zip(specs, arrays, strict=True):
        rows = bounds.get(spec.name)
        if rows is None or not array.size or not np.issubdtype(array.dtype, np.integer):
            continue
        low, high = int(array.min()), int(array.max())
        if low < 0 or high >= rows:
            raise InvalidInputError(
                f"input {spec.name!r}: value {low if low < 0 else high} out of range [0, {rows}): "
                f"method {method!r} looks it up in a quantized embedding of {rows} rows, whose "
                "upstream kernel does not check its indices"
            )


def _check_runnable(guards: KernelGuards, method: str) -> None:
    """Raise if ``method`` must not run at all (``KernelGuards.refused``)."""
    why = guards.refused.get(method) or guards.refused.get("*")
    if why is not None:
        raise ProgramLoadError(f"method {method!r} cannot run here: {why}")


def _check_finite(method: str, specs: Sequence[TensorSpec], arrays: Sequence[np.ndarray]) -> None:
    for spec, array in zip(specs, arrays, strict=True):
        if is_float(array.dtype) and not np.isfinite(array).all():
            raise InvalidInputError(
                f"input {spec.name!r}: NaN or infinity refused: method {method!r} quantizes "
                "dynamically on upstream's portable choose_qparams kernel, which aborts the "
                "worker on a NaN scale (an infinity becomes NaN inside the graph)"
            )


def check_value_bounds(guards: KernelGuards, method: str, highest: Mapping[str, int]) -> None:
    """Raise unless ``method`` may run with every input of ``highest`` holding values in
    ``[0, highest[name])`` unchecked, as a generation feeds token ids below the vocabulary
    and positions below the context (checked once per generation, not per token)."""
    _check_runnable(guards, method)
    for name, bound in highest.items():
        rows = guards.rows.get(method, {}).get(name)
        if rows is not None and rows < bound:
            raise ProgramLoadError(
                f"method {method!r} cannot run here: input {name!r} takes values up to "
                f"{bound - 1} and looks them up in a quantized embedding of {rows} rows, whose "
                "upstream kernel does not check its indices"
            )
