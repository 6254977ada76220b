"""Where a kernel's argument comes from in a program, and whether a check of the method's
inputs can bound it (for :mod:`pteforge.runtime.kernel_guards`): a quantized embedding's
indices, and the position a KV-cache kernel writes at.

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

``llama::update_cache`` and ``llama::sdpa_with_kv_cache`` write at a ``start_pos`` they do
not check below 0 (:data:`POSITION_WRITERS`). The input check keeps a method's integer
inputs at 0 or more, which bounds a position only if the kernel gets an element of such an
input unchanged: read by ``_local_scalar_dense`` from an ``int64`` input through copies
(and ``select``/``slice``, which keep a subset of its values), as ``export_llama`` and
optimum-executorch programs do, or a constant of 0 or more. A position the method computes
(``start - 1`` passes every check at ``start = 0`` and writes before the cache) is
:func:`position_hazard`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pteforge.runtime.metadata import input_name
from pteforge.runtime.tensor_dims import value_of, written_values

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

SUBSET_OPERATORS = frozenset({"aten::select_copy", "aten::slice_copy"})
"""Operators whose output holds some of its first argument's values: a bound holds too."""

POSITION_WRITERS = {"llama::update_cache": 2, "llama::sdpa_with_kv_cache": 5}
"""KV-cache kernels that write at a ``start_pos`` (the argument at this index) they check
against the cache's end but not below 0 (ExecuTorch 1.5.1)."""

SCALAR_READ = "aten::_local_scalar_dense"
"""``tensor.item()``: ``(tensor, out)``, the out an ``Int`` value."""

_LONG = 4

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
    written: dict[int, list[int]] = field(default_factory=dict)
    """Every value any instruction writes, with the instructions that write it."""
    positions: list[tuple[int, str, int]] = field(default_factory=list)
    """(instruction, operator, position value) of each :data:`POSITION_WRITERS` call."""
    scalars: dict[int, int] = field(default_factory=dict)
    """``Int`` value -> the tensor value a :data:`SCALAR_READ` reads it from."""
    jumps: bool = False


def method_hazards(plan: Any) -> tuple[dict[str, int], str | None]:
    """Input name -> rows, for each input of ``plan`` whose values reach a quantized
    embedding's indices unchanged; and why ``plan`` must not run here (None: it may)."""
    flow = _dataflow(plan)
    bounds, why = _index_bounds(plan, flow)
    return bounds, why or position_hazard(plan, flow)


def _index_bounds(plan: Any, flow: _Flow) -> tuple[dict[str, int], str | None]:
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
    return _overwritten(plan, flow, at, chain, "its indices")


def _overwritten(plan: Any, flow: _Flow, at: int, chain: list[int], what: str) -> str | None:
    """Why the values of ``chain`` (back to an input) may not be the input's at instruction
    ``at``: a jump, or an instruction before it writing them or their memory."""
    if flow.jumps:
        return "the method jumps, so what runs before the kernel is not known"
    regions = [r for r in (_region(plan, v) for v in chain) if r is not None]
    for position, written in enumerate(flow.writes[:at]):
        for value in written:
            if value in chain:
                if flow.copies.get(value, (0, -1))[1] != position:
                    return f"an instruction before the kernel writes {what}"
            elif any(_overlap(_region(plan, value), r) for r in regions):
                return f"a value written before the kernel shares the memory {what} are read from"
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
                written.update(written_values(plan, name, args))
                _record_call(plan, flow, at, name, args)
            flow.writes.append(written)
            for value in written:
                flow.written.setdefault(value, []).append(at)
    return flow


def _record_call(plan: Any, flow: _Flow, at: int, name: str, args: list[int]) -> None:
    """Note kernel call ``at`` of operator ``name`` if the analysis follows it."""
    if name in COPY_OPERATORS | SUBSET_OPERATORS and len(args) >= 2 and _wide(plan, args[-1]):
        flow.copies[args[-1]] = (args[0], at)
    elif name in INDEX_OPERATORS and len(args) >= 6:
        flow.lookups.append((at, name, args[5], args[0]))
    elif name in POSITION_WRITERS and len(args) > POSITION_WRITERS[name]:
        flow.positions.append((at, name, args[POSITION_WRITERS[name]]))
    elif name == SCALAR_READ and len(args) == 2:
        flow.scalars[args[1]] = args[0]


def position_hazard(plan: Any, flow: _Flow) -> str | None:
    """Why a KV-cache kernel of ``plan`` may write at a position below 0 whatever the input
    check lets through (None: each position is a constant >= 0 or an ``int64`` input's
    element, unchanged)."""
    inputs = {value: i for i, value in enumerate(plan.inputs)}
    for at, operator, position in flow.positions:
        why = _position_source(plan, flow, inputs, at, position)
        if why is not None:
            return (
                f"it calls {operator}, whose kernel writes before its cache at a negative "
                f"position, and {why}"
            )
    return None


def _position_source(
    plan: Any, flow: _Flow, inputs: dict[int, int], at: int, value: int
) -> str | None:
    writers = flow.written.get(value, [])
    if not writers:
        constant = getattr(value_of(plan, value), "int_val", None)
        if value in inputs or not isinstance(constant, int):
            return "its position is neither a constant nor read from an input"
        return None if constant >= 0 else f"its position is the constant {constant}"
    source = flow.scalars.get(value)
    chain = None if source is None else _chain(plan, source, flow, inputs)
    if len(writers) != 1 or writers[0] > at or chain is None:
        return "its position is computed by the method, not read from an input"
    if any(getattr(value_of(plan, v), "scalar_type", None) != _LONG for v in chain):
        return "its position is read from an input through a narrower integer type"
    return _overwritten(plan, flow, writers[0], chain, "its position")


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


def _wide(plan: Any, value: int) -> bool:
    """Whether value ``value`` of ``plan`` is an ``int32`` or ``int64`` tensor."""
    return getattr(value_of(plan, value), "scalar_type", None) in _WIDE_INTEGERS


def _storage(plan: Any, value: int) -> tuple[int, ...] | None:
    """Where tensor value ``value`` of ``plan`` lies, its element count and dtype."""
    info = getattr(value_of(plan, value), "allocation_info", None)
    if info is None:
        return None
    tensor = value_of(plan, value)
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
    sizes = getattr(value_of(plan, weight), "sizes", None)
    return int(sizes[0]) if sizes else None
