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

Upstream's quantized embedding kernels (``quantized_decomposed::embedding_byte``,
``embedding_2bit``, ``embedding_4bit``, and their ``dtype`` overloads) look up rows of a
constant weight by an ``indices`` tensor. ``embedding_byte`` checks ``0 <= index < rows``
with ``ET_CHECK_MSG``, which aborts the whole worker; ``embedding_2bit`` and
``embedding_4bit`` do not check at all: an index past the weight (16 rows: 16, 17, -1,
+-10**6) answers the bytes found there, dequantized (an out-of-bounds read, whose output
returns another caller's memory), and 10**11 is a segmentation fault (measured on 1.5.1).
Where such a kernel's ``indices`` is a method input (directly, through a static view of it,
or through copies that keep its values: :data:`COPY_OPERATORS`), pteforge refuses values
outside ``[0, rows)``, the rows read from the weight's shape in the program; indices that a
method computes (a position plus an offset) are not checked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.runtime.errors import InvalidInputError
from pteforge.runtime.metadata import (
    MALFORMED_FLATBUFFER,
    ProgramFlatbuffer,
    TensorSpec,
    input_name,
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
    return kernel_guards(path).positions


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


INDEX_OPERATORS = frozenset(
    {
        "quantized_decomposed::embedding_byte",
        "quantized_decomposed::embedding_2bit",
        "quantized_decomposed::embedding_4bit",
    }
)
"""Quantized embeddings: ``(weight, scales, zero_points, quant_min, quant_max, indices,
...)`` in every overload; the byte kernel aborts on an index out of range, the others read
out of bounds."""

COPY_OPERATORS = frozenset(
    {
        "executorch_prim::et_view",
        "aten::view_copy",
        "aten::_unsafe_view",
        "aten::clone",
        "aten::squeeze_copy",
        "aten::unsqueeze_copy",
        "aten::_to_copy",
        "aten::_to_dim_order_copy",
        "dim_order_ops::_to_dim_order_copy",
    }
)
"""Operators whose output holds its first argument's values (the out tensor last): an index
bound on a method input holds through them into an ``int32`` or ``int64`` output."""

_WIDE_INTEGERS = frozenset({3, 4})
"""``ScalarType`` INT and LONG of the program schema: ``[0, rows)`` survives a cast to them."""


@dataclass(frozen=True)
class KernelGuards:
    """What a program's methods must be checked for before they run: the methods refusing
    negative integer inputs (:data:`POSITION_OPERATORS`), and per method, each input that
    is a quantized embedding's indices with the rows of its (smallest) weight."""

    positions: frozenset[str] = frozenset()
    rows: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def kernel_guards(path: Path | ProgramFlatbuffer) -> KernelGuards:
    """The :class:`KernelGuards` of the ``.pte`` at ``path`` (read once, when loaded)."""
    try:
        plans = list(program_table(path).execution_plan)
        positions = frozenset(
            str(plan.name)
            for plan in plans
            if any(op.name in POSITION_OPERATORS for op in plan.operators)
        )
        rows = {str(plan.name): bounds for plan in plans if (bounds := _index_bounds(plan))}
    except MALFORMED_FLATBUFFER:
        return KernelGuards(EVERY_METHOD)
    return KernelGuards(positions, rows)


def _index_bounds(plan: Any) -> dict[str, int]:
    """Input name -> rows, for each input of ``plan`` whose values reach a quantized
    embedding's indices unchanged."""
    lookups, copies, written = _dataflow(plan)
    positions = {value: i for i, value in enumerate(plan.inputs)}
    bounds: dict[str, int] = {}
    for indices, weight in lookups:
        origin = _origin(plan, indices, copies, written, positions)
        count = _rows(plan, weight)
        if origin is not None and count is not None:
            name = input_name(positions[origin])
            bounds[name] = min(count, bounds.get(name, count))
    return bounds


def _dataflow(plan: Any) -> tuple[list[tuple[int, int]], dict[int, int], set[int]]:
    """``plan``'s lookups (indices value, weight value), its copies (output value -> input
    value) and every value an instruction writes (a kernel's last argument, its out; a
    delegate's arguments; a move's target)."""
    names = [str(op.name) for op in plan.operators]
    lookups: list[tuple[int, int]] = []
    copies: dict[int, int] = {}
    written: set[int] = set()
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            if hasattr(call, "move_from"):
                copies[call.move_to] = call.move_from
                written.add(call.move_to)
            elif hasattr(call, "delegate_index"):
                written.update(call.args)
            elif hasattr(call, "op_index") and call.args and 0 <= call.op_index < len(names):
                name, args = names[call.op_index], list(call.args)
                written.add(args[-1])
                if name in COPY_OPERATORS and len(args) >= 2 and _wide(plan, args[-1]):
                    copies[args[-1]] = args[0]
                elif name in INDEX_OPERATORS and len(args) >= 6:
                    lookups.append((args[5], args[0]))
    return lookups, copies, written


def _origin(
    plan: Any, value: int, copies: dict[int, int], written: set[int], inputs: dict[int, int]
) -> int | None:
    """The input value whose values ``value`` holds unchanged (through copies and static
    views), or None."""
    seen: set[int] = set()
    while value not in inputs:
        if value in seen:
            return None
        seen.add(value)
        if value in copies:
            value = copies[value]
        elif value in written:
            return None
        else:  # a static view (``view``, ``reshape``): no instruction, the input's memory
            key = _storage(plan, value)
            views = [i for i in inputs if key is not None and _storage(plan, i) == key]
            if not views:
                return None
            value = views[0]
    return value


def _wide(plan: Any, value: int) -> bool:
    """Whether value ``value`` of ``plan`` is an ``int32`` or ``int64`` tensor."""
    in_plan = 0 <= value < len(plan.values)
    return in_plan and getattr(plan.values[value].val, "scalar_type", None) in _WIDE_INTEGERS


def _storage(plan: Any, value: int) -> tuple[int, ...] | None:
    """Where tensor value ``value`` of ``plan`` lies, its element count and dtype."""
    if not 0 <= value < len(plan.values):
        return None
    tensor = plan.values[value].val
    info = getattr(tensor, "allocation_info", None)
    if info is None:
        return None
    where = (info.memory_id, info.memory_offset_low, info.memory_offset_high)
    return (*where, math.prod(tensor.sizes), int(tensor.scalar_type))


def _rows(plan: Any, weight: int) -> int | None:
    """The first dimension of tensor value ``weight`` of ``plan``, if it is one."""
    if not 0 <= weight < len(plan.values):
        return None
    sizes = getattr(plan.values[weight].val, "sizes", None)
    return int(sizes[0]) if sizes else None


def check_inputs(
    guards: KernelGuards, method: str, specs: Sequence[TensorSpec], arrays: Sequence[np.ndarray]
) -> None:
    """Raise if an input of ``method`` holds a value its kernels do not check and must not
    see (call after the inputs were checked against the method's signature)."""
    check_positions(guards.positions, method, specs, arrays)
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
