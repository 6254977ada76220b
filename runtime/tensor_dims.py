"""What a tensor's dimension holds when a kernel runs, read from a program (for
:mod:`pteforge.runtime.attention_shapes`).

ExecuTorch bounds a dynamic tensor by its planned element count, not dimension by dimension,
so a dynamic tensor's planned sizes bound nothing one by one. :class:`Dims` follows a
dimension back through the instructions that shape it instead, to a size that is known
(fixed, or a method input's, which pteforge checks dimension by dimension) or to an
expression two dimensions can share (the same ``Int`` a view or a slice takes, written
once, before its reader, in a method that does not jump), through views, permutations,
slices, copies, elementwise operators (broadcast), reductions that keep their dimensions,
concatenations and ``unsqueeze``. Anything else is unknown (None), as is any tensor written
twice or after its reader.
"""

from __future__ import annotations

from typing import Any

VIEW_OPERATORS = frozenset({"executorch_prim::et_view", "aten::view_copy", "aten::_unsafe_view"})
"""``(input, sizes, out)``: the out takes the sizes listed."""

SHAPE_KEEPING = frozenset(
    {
        "aten::clone",
        "aten::_to_copy",
        "aten::_to_dim_order_copy",
        "dim_order_ops::_to_dim_order_copy",
        "quantized_decomposed::quantize_per_token",
        "quantized_decomposed::dequantize_per_token",
    }
)
"""Operators whose out takes their first argument's shape."""

ELEMENTWISE = frozenset(
    {
        "aten::add",
        "aten::sub",
        "aten::mul",
        "aten::div",
        "aten::pow",
        "aten::where",
        "aten::rsqrt",
        "aten::sqrt",
        "aten::neg",
        "aten::cos",
        "aten::sin",
        "aten::exp",
        "aten::tanh",
        "aten::sigmoid",
        "aten::gelu",
        "dim_order_ops::_clone_dim_order",
    }
)
"""Operators whose out takes their tensor arguments' broadcast shape."""

REDUCING = frozenset({"aten::mean", "aten::sum", "aten::amax"})
"""``(input, dims, keepdim, ..., out)``: each reduced dimension 1 where ``keepdim``."""

QPARAM_PRODUCERS = frozenset({"quantized_decomposed::choose_qparams_per_token_asymmetric"})
"""Kernels whose outs (scales, zero points) take their input's shape with a last dimension
of 1: one element per row."""

RESIZES_FIRST = frozenset({"executorch_prim::et_copy_index"})
"""Kernels that resize their first argument (not their out) to a size a value gives."""

_STATIC = 0
_MAX_DEPTH = 64

Dim = tuple[Any, ...]
"""A dimension as run: ``("n", size)`` fixed; ``("le", bound, value, axis)`` a method
input's, at most ``bound``; ``("int", value)`` an ``Int`` value's; ``("slice", ...)``."""

Writers = dict[int, list[tuple[str, list[int]]]]
"""Value -> (operator, arguments) of each instruction that writes it."""


class Dims:
    """The dimensions of the tensors of one execution plan, as run."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.writers, self.at, self.calls, self.jumps = _writers(plan)
        self.inputs = set(plan.inputs)
        self.once = {v for v, w in self.writers.items() if len(w) == 1}
        self._shapes: dict[tuple[int, int], Dim | None] = {}  # each dimension followed once

    def size(self, value: int, dim: int, before: int, depth: int = 0) -> Dim | None:
        """Dimension ``dim`` of tensor value ``value`` when instruction ``before`` reads it
        (None: not known)."""
        tensor = tensor_of(self.plan, value)
        if tensor is None or not tensor.sizes or depth > _MAX_DEPTH:
            return None
        axis = dim % len(tensor.sizes)
        if is_static(tensor):
            return ("n", int(tensor.sizes[axis]))
        if value in self.inputs and value not in self.writers:
            return ("le", int(tensor.sizes[axis]), value, axis)
        calls = self.writers.get(value, [])
        if self.jumps or len(calls) != 1 or self.at[value] >= before:
            return None  # what runs first is not known, or it is written twice or after
        if (value, axis) not in self._shapes:
            self._shapes[value, axis] = self._shaped(calls[0], axis, depth + 1, self.at[value])
        return self._shapes[value, axis]

    def _shaped(self, call: tuple[str, list[int]], axis: int, depth: int, at: int) -> Dim | None:
        """Dimension ``axis`` of the out of ``call``, instruction ``at``."""
        name, args = call
        if len(args) >= 2 and args[-1] == args[-2]:
            args = args[:-1]  # an aten kernel's out, then the same out as its result
        if name in VIEW_OPERATORS and len(args) == 3:
            items = getattr(value_of(self.plan, args[1]), "items", None) or []
            size = self.integer(items[axis], at) if axis < len(items) else None
            return size if size is None or size[0] != "n" or size[1] >= 0 else None
        if name in SHAPE_KEEPING or (name in QPARAM_PRODUCERS and axis < self._rank(args[0]) - 1):
            return self.size(args[0], axis, at, depth)
        if name in QPARAM_PRODUCERS:
            return ("n", 1)
        if name == "aten::permute_copy" and len(args) == 3:
            items = getattr(value_of(self.plan, args[1]), "items", None) or []
            source = self.integer(items[axis], at) if axis < len(items) else None
            return self.size(args[0], source[1], at, depth) if source and source[0] == "n" else None
        if name == "aten::slice_copy" and len(args) == 6:
            return self._sliced(args, axis, depth, at)
        if name in ELEMENTWISE:
            return self._broadcast(args, axis, depth, at)
        if name in REDUCING and len(args) >= 4:
            return self._reduced(args, axis, depth, at)
        if name == "aten::cat" and len(args) == 3:
            return self._joined(args, axis, depth, at)
        if name == "aten::unsqueeze_copy" and len(args) == 3:
            added = self.integer(args[1], at)
            if added is None or added[0] != "n":
                return None
            added_axis = added[1] % max(self._rank(args[-1]), 1)
            if axis == added_axis:
                return ("n", 1)
            return self.size(args[0], axis - (axis > added_axis), at, depth)
        return None

    def _broadcast(self, args: list[int], axis: int, depth: int, at: int) -> Dim | None:
        """Dimension ``axis`` of an elementwise out: its tensor arguments' broadcast."""
        rank = self._rank(args[-1])
        tensors = [a for a in args[:-1] if tensor_of(self.plan, a) is not None]
        sizes = [
            self.size(a, axis - rank + self._rank(a), at, depth)
            for a in tensors
            if axis - rank + self._rank(a) >= 0
        ]
        wide = {size for size in sizes if size != ("n", 1)}
        if not tensors or None in sizes or len(wide) > 1:
            return None
        return wide.pop() if wide else ("n", 1)

    def _joined(self, args: list[int], axis: int, depth: int, at: int) -> Dim | None:
        """Dimension ``axis`` of ``cat(tensors, dim, out)`` other than ``dim``: the tensors'
        (the kernel checks they agree; one that does not tell is refused)."""
        joined = self.integer(args[1], at)
        rank = max(self._rank(args[-1]), 1)
        if joined is None or joined[0] != "n" or joined[1] % rank == axis:
            return None
        items = getattr(value_of(self.plan, args[0]), "items", None) or []
        sizes = {self.size(item, axis, at, depth) for item in items}
        return sizes.pop() if len(sizes) == 1 else None

    def _reduced(self, args: list[int], axis: int, depth: int, at: int) -> Dim | None:
        """Dimension ``axis`` of a reduction that keeps its dimensions."""
        if getattr(value_of(self.plan, args[2]), "bool_val", None) is not True:
            return None
        items = getattr(value_of(self.plan, args[1]), "items", None) or []
        reduced = [self.integer(item, at) for item in items]
        if any(r is None or r[0] != "n" for r in reduced):
            return None
        rank = max(self._rank(args[0]), 1)
        if not reduced or axis in {r[1] % rank for r in reduced if r is not None}:
            return ("n", 1)
        return self.size(args[0], axis, at, depth)

    def _sliced(self, args: list[int], axis: int, depth: int, at: int) -> Dim | None:
        """``slice_copy(input, dim, start, end, step, out)``'s dimension ``axis``."""
        sliced = self.integer(args[1], at)
        if sliced is None or sliced[0] != "n":
            return None
        if sliced[1] % max(self._rank(args[0]), 1) != axis:
            return self.size(args[0], axis, at, depth)
        parts = (self.size(args[0], axis, at, depth), *(self.integer(a, at) for a in args[2:5]))
        return None if None in parts else ("slice", *parts)

    def integer(self, value: int, at: int) -> Dim | None:
        """An ``Int`` (or absent) argument of instruction ``at``: fixed, or one value written
        once, before ``at``."""
        held = value_of(self.plan, value)
        if value not in self.writers:
            number = getattr(held, "int_val", None)
            return ("n", number) if isinstance(number, int) else ("null",) if held is None else None
        once = value in self.once and not self.jumps
        return ("int", value) if once and self.at[value] < at else None

    def _rank(self, value: int) -> int:
        tensor = tensor_of(self.plan, value)
        return len(tensor.sizes) if tensor is not None else 0


def at_most(a: Dim | None, b: Dim | None) -> bool:
    """Whether dimension ``a`` is never larger than ``b`` when run."""
    if a is None or b is None:
        return False
    if a == b and a[0] != "null":
        return True
    return a[0] in ("n", "le") and b[0] == "n" and a[1] <= b[1]


def _writers(plan: Any) -> tuple[Writers, dict[int, int], list[tuple[int, str, list[int]]], bool]:
    """Each value's writing instructions, the position of its last, each kernel call with
    its position, and whether the plan jumps."""
    names = [str(op.name) for op in plan.operators]
    found: Writers = {}
    last: dict[int, int] = {}
    calls: list[tuple[int, str, list[int]]] = []
    jumps = False
    instructions = [i.instr_args for chain in plan.chains for i in chain.instructions]
    for position, call in enumerate(instructions):
        index = getattr(call, "op_index", -1)
        jumps = jumps or hasattr(call, "destination_instruction")
        written: list[tuple[int, tuple[str, list[int]]]] = []
        if hasattr(call, "move_from"):
            written = [(call.move_to, ("move", []))]
        elif hasattr(call, "delegate_index"):
            written = [(value, ("delegate", [])) for value in call.args]
        elif 0 <= index < len(names) and call.args:
            entry = (names[index], list(call.args))
            calls.append((position, *entry))
            written = [(value, entry) for value in written_values(plan, entry[0], entry[1])]
        for value, entry in written:
            found.setdefault(value, []).append(entry)
            last[value] = position
    return found, last, calls, jumps


def written_values(plan: Any, name: str, args: list[int]) -> list[int]:
    """The values a kernel call writes or resizes: its out (or each of a list of outs), and
    the tensor ``et_copy_index`` grows (its first argument)."""
    listed = getattr(value_of(plan, args[-1]), "items", None) or []
    return [args[-1], *listed, *(args[:1] if name in RESIZES_FIRST else [])]


def value_of(plan: Any, value: int) -> Any:
    """What value ``value`` of ``plan`` holds (None: no such value, or a ``Null``)."""
    held = plan.values[value].val if 0 <= value < len(plan.values) else None
    return None if type(held).__name__ == "Null" else held


def tensor_of(plan: Any, value: int) -> Any:
    """Value ``value`` of ``plan`` if it is a tensor (None: not one)."""
    held = value_of(plan, value)
    return held if hasattr(held, "sizes") and hasattr(held, "shape_dynamism") else None


def is_static(tensor: Any) -> bool:
    """Whether ``tensor`` (a program's) has a fixed shape."""
    dynamism = tensor.shape_dynamism
    return int(getattr(dynamism, "value", dynamism)) == _STATIC
