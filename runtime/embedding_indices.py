"""Where a quantized embedding's indices come from in a program, and whether a check of the
method's inputs can bound them (for :mod:`pteforge.runtime.kernel_guards`).

Upstream's ``embedding_2bit`` and ``embedding_4bit`` read their weight at whatever index
they are given: an out-of-range one answers the bytes found there (another caller's memory,
in a shared worker). An input check bounds them only if the kernel reads exactly the values
the caller sent: its ``indices`` must be a method input, or a static view of one, or copies
that keep its values (:data:`COPY_OPERATORS`), and nothing the method runs before the lookup
may write into the memory they are read from. A hand-made program can plan another value
into that memory, compute the indices, or jump; each of those makes the method
:func:`unsafe` to run here. ``embedding_byte`` checks its indices itself (by aborting the
worker, which the pool survives), so its indices are bounded where they can be and never
refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pteforge.runtime.metadata import input_name

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

UNCHECKED_OPERATORS = INDEX_OPERATORS - {"quantized_decomposed::embedding_byte"}
"""The lookups that read out of bounds: only run where an input check bounds them."""

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

_ELEMENT_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2}
"""Bytes per element by ``ScalarType`` (others: 8, the most a region can then cover)."""


@dataclass
class _Flow:
    """A plan's instructions as the analysis needs them, in execution order."""

    lookups: list[tuple[int, str, int, int]] = field(default_factory=list)
    """(instruction, operator, indices value, weight value) of each quantized embedding."""
    copies: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Output value -> (input value, instruction) of each value-keeping copy."""
    writes: list[set[int]] = field(default_factory=list)
    """The values each instruction writes (a kernel's out, a delegate's every argument)."""
    written: set[int] = field(default_factory=set)
    """Every value any instruction writes (the union of ``writes``)."""
    jumps: bool = False


def index_bounds(plan: Any) -> tuple[dict[str, int], str | None]:
    """Input name -> rows, for each input of ``plan`` whose values reach a quantized
    embedding's indices unchanged; and why ``plan`` must not run here (None: it may)."""
    flow = _dataflow(plan)
    inputs = {value: i for i, value in enumerate(plan.inputs)}
    bounds: dict[str, int] = {}
    for at, operator, indices, weight in flow.lookups:
        chain, rows = _chain(plan, indices, flow, inputs), _rows(plan, weight)
        if operator in UNCHECKED_OPERATORS:
            why = unsafe(plan, flow, at, chain, rows)
            if why is not None:
                return (
                    bounds,
                    f"it calls {operator}, whose kernel does not check its indices, and {why}",
                )
        if chain is not None and rows is not None:
            name = input_name(inputs[chain[-1]])
            bounds[name] = min(rows, bounds.get(name, rows))
    return bounds, None


def unsafe(
    plan: Any, flow: _Flow, at: int, chain: list[int] | None, rows: int | None
) -> str | None:
    """Why no input check bounds the lookup at instruction ``at`` (None: one does)."""
    if rows is None:
        return "its weight's rows are not in the program"
    if chain is None:
        return "its indices are computed by the method, not taken from an input"
    if flow.jumps:
        return "the method jumps, so what runs before the lookup is not known"
    regions = [r for r in (_region(plan, v) for v in chain) if r is not None]
    for position, written in enumerate(flow.writes[:at]):
        for value in written:
            if value in chain:
                if flow.copies.get(value, (0, -1))[1] != position:
                    return "an instruction before the lookup writes its indices"
            elif any(_overlap(_region(plan, value), r) for r in regions):
                return (
                    "a value written before the lookup shares the memory its indices are read from"
                )
    return None


def _dataflow(plan: Any) -> _Flow:
    names = [str(op.name) for op in plan.operators]
    flow = _Flow()
    for chain in plan.chains:
        for instruction in chain.instructions:
            call, at = instruction.instr_args, len(flow.writes)
            written: set[int] = set()
            if hasattr(call, "move_from"):
                flow.copies[call.move_to] = (call.move_from, at)
                written.add(call.move_to)
            elif hasattr(call, "delegate_index"):
                written.update(call.args)
            elif hasattr(call, "destination_instruction"):
                flow.jumps = True
            elif hasattr(call, "op_index") and call.args and 0 <= call.op_index < len(names):
                name, args = names[call.op_index], list(call.args)
                written.add(args[-1])
                if name in COPY_OPERATORS and len(args) >= 2 and _wide(plan, args[-1]):
                    flow.copies[args[-1]] = (args[0], at)
                elif name in INDEX_OPERATORS and len(args) >= 6:
                    flow.lookups.append((at, name, args[5], args[0]))
            flow.writes.append(written)
            flow.written |= written
    return flow


def _chain(plan: Any, value: int, flow: _Flow, inputs: dict[int, int]) -> list[int] | None:
    """The values from ``value`` back to the input whose values it holds unchanged (through
    copies and static views), the input last; None if it holds computed values."""
    chain = [value]
    while value not in inputs:
        if value in flow.copies:
            value = flow.copies[value][0]
        elif value in flow.written:
            return None
        else:  # a static view (``view``, ``reshape``): no instruction, the input's memory
            key = _storage(plan, value)
            views = [i for i in inputs if key is not None and _storage(plan, i) == key]
            if not views:
                return None
            value = views[0]
        if value in chain:
            return None
        chain.append(value)
    return chain


def _tensor(plan: Any, value: int) -> Any:
    return plan.values[value].val if 0 <= value < len(plan.values) else None


def _wide(plan: Any, value: int) -> bool:
    """Whether value ``value`` of ``plan`` is an ``int32`` or ``int64`` tensor."""
    return getattr(_tensor(plan, value), "scalar_type", None) in _WIDE_INTEGERS


def _storage(plan: Any, value: int) -> tuple[int, ...] | None:
    """Where tensor value ``value`` of ``plan`` lies, its element count and dtype."""
    info = getattr(_tensor(plan, value), "allocation_info", None)
    if info is None:
        return None
    tensor = _tensor(plan, value)
    where = (info.memory_id, info.memory_offset_low, info.memory_offset_high)
    return (*where, math.prod(tensor.sizes), int(tensor.scalar_type))


def _region(plan: Any, value: int) -> tuple[int, int, int] | None:
    """The planned memory of tensor value ``value``: (memory id, first byte, end)."""
    storage = _storage(plan, value)
    if storage is None:
        return None
    memory, low, high, count, dtype = storage
    start = (high << 32) | low
    return memory, start, start + max(count, 1) * _ELEMENT_BYTES.get(dtype, 8)


def _overlap(a: tuple[int, int, int] | None, b: tuple[int, int, int]) -> bool:
    """Whether planned region ``a`` (None: not planned) shares a byte with ``b``."""
    return a is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def _rows(plan: Any, weight: int) -> int | None:
    """The first dimension of tensor value ``weight`` of ``plan``, if it is one."""
    sizes = getattr(_tensor(plan, weight), "sizes", None)
    return int(sizes[0]) if sizes else None
