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
either), so such a method's integer inputs must not hold negative values. A hand-made
``.pte`` can still compute a negative position inside its graph: that stays contained by
the worker's confinement only (see ``docs/deployment.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pteforge.runtime.errors import InvalidInputError
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

EVERY_METHOD = frozenset({"*"})
"""What :func:`position_guarded_methods` answers when it cannot read the program."""


def position_guarded_methods(path: Path | ProgramFlatbuffer) -> frozenset[str]:
    """The methods of the ``.pte`` at ``path`` that call an operator of
    :data:`POSITION_OPERATORS` (:data:`EVERY_METHOD` if its flatbuffer is
    unreadable: which operators it calls is then unknown)."""
    try:
        plans = list(program_table(path).execution_plan)
        return frozenset(
            str(plan.name)
            for plan in plans
            if any(op.name in POSITION_OPERATORS for op in plan.operators)
        )
    except MALFORMED_FLATBUFFER:
        return EVERY_METHOD


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
