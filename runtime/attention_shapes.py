"""Tensor shapes upstream's attention kernels trust, read from a program before it runs (for
:mod:`pteforge.runtime.kernel_guards`).

ExecuTorch 1.5.1's ``llama::custom_sdpa`` and ``llama::custom_quantized_sdpa`` check that
query, key and value are 4-D with one head size, and the heads, but not that the key and
value caches hold the query's batch, nor that key and value have one shape: a query of
batch 2 over caches of batch 1 answered, for its second row, the values of the buffer
planned after the value cache (another tensor's bytes; batch 64 answered heap pointers).
The quantized kernel reads each scale at the offset of its zero point (the zero points'
strides), checking neither tensor's last dimension: zero points of ``[1, 8, 2, 64]`` beside
scales of ``[1, 8, 2, 1]`` read scales past their tensor (a wrong answer; 100000 wide: a
segmentation fault). ``llama::sdpa_with_kv_cache`` checks the cache against its ``seq_len``
argument but copies the whole key and value: ``seq_len`` 1 with 4 new positions at the
cache's last position wrote 3 positions past the cache (the process aborted in ``free``).

So a method is refused (:func:`attention_hazard`, 422) where a call of these kernels could
read or write past its tensors whatever its inputs hold: ``sdpa_with_kv_cache`` at all (no
upstream export emits it any more), a key or value whose shape is not fixed or not the
other's, a query planned for a larger batch than the caches, quantization parameters whose
zero points and scales differ in shape or are not one per row. ExecuTorch bounds a dynamic
tensor by its planned element count, not dimension by dimension (a query planned as
``[1, 8, 2, 4]`` and viewed to ``[2, 1, 2, 4]`` read past the caches), so a dynamic
query's batch is taken from its planned shape only where it is an input (checked dimension
by dimension), else from the constant a view gives it (as in ``export_llama`` programs):
a batch known only at run time is refused. So is a zero point or scale whose last dimension
may be resized past 1 at run time (one per row holds for a fixed one, an input, a view to a
constant 1, or a per-token ``choose_qparams`` out, through shape-keeping copies).
"""

from __future__ import annotations

from typing import Any

REFUSED_OPERATORS = {
    "llama::sdpa_with_kv_cache": "its kernel bounds the cache write by its seq_len argument "
    "but copies the whole key and value, so a seq_len smaller than theirs writes past the cache"
}
"""Operators no method may call here, with why."""

SDPA_OPERATORS = frozenset({"llama::custom_sdpa", "llama::custom_quantized_sdpa"})
"""Attention over caches: ``(query, key, value, start_pos, ...)``."""

QPARAM_PAIRS = ((8, 9), (10, 11), (12, 13))
"""``custom_quantized_sdpa``'s (zero points, scales) arguments of query, key and value."""

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

QPARAM_PRODUCERS = frozenset({"quantized_decomposed::choose_qparams_per_token_asymmetric"})
"""Kernels whose outs (scales, zero points) hold one element per row: a last dimension of 1."""

RESIZES_FIRST = frozenset({"executorch_prim::et_copy_index"})
"""Kernels that resize their first argument (not their out) to a size a value gives."""

_STATIC = 0
_MAX_DEPTH = 16

Writers = dict[int, list[tuple[str, list[int]]]]
"""Value -> (operator, arguments) of each instruction that writes it."""


def attention_hazard(plan: Any) -> str | None:
    """Why a call in ``plan`` of an attention kernel may read or write past its tensors
    (None: none may)."""
    writers = _writers(plan)
    for calls in writers.values():
        for name, args in calls:
            why = REFUSED_OPERATORS.get(name)
            if why is None and name in SDPA_OPERATORS:
                why = _sdpa_hazard(plan, writers, args)
            if why is not None:
                return f"it calls {name}, and {why}"
    return None


def _writers(plan: Any) -> Writers:
    names = [str(op.name) for op in plan.operators]
    found: Writers = {}
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            index = getattr(call, "op_index", -1)
            if hasattr(call, "move_from"):
                found.setdefault(call.move_to, []).append(("move", []))
            elif hasattr(call, "delegate_index"):
                for value in call.args:
                    found.setdefault(value, []).append(("delegate", []))
            elif 0 <= index < len(names) and call.args:
                for value in _outputs(plan, names[index], list(call.args)):
                    found.setdefault(value, []).append((names[index], list(call.args)))
    return found


def _outputs(plan: Any, name: str, args: list[int]) -> list[int]:
    """The values a kernel call writes or resizes: its out (or each of a list of outs), and
    the tensor ``et_copy_index`` grows (its first argument)."""
    listed = getattr(_value(plan, args[-1]), "items", None) or []
    return [args[-1], *listed, *(args[:1] if name in RESIZES_FIRST else [])]


def _sdpa_hazard(plan: Any, writers: Writers, args: list[int]) -> str | None:
    query, key, value = (_tensor(plan, a) for a in [*args, -1, -1, -1][:3])
    if query is None or key is None or value is None:
        return "its query, key or value is not a tensor of the program"
    if not (_static(key) and _static(value)):
        return "its key or value cache is not of fixed shape, which its kernel trusts"
    if list(key.sizes) != list(value.sizes):
        return f"its key {list(key.sizes)} and value {list(value.sizes)} differ in shape"
    batch = _dim_bound(plan, writers, set(plan.inputs), args[0], 0)
    if batch is None:
        return "its query's batch is computed at run time, and its kernel reads the caches at it"
    if not key.sizes or batch > int(key.sizes[0]):
        return (
            f"its query {list(query.sizes)} has a larger batch than its key and value caches "
            f"{list(key.sizes)}, which its kernel reads past"
        )
    return _qparams_hazard(plan, writers, args) if len(args) > QPARAM_PAIRS[-1][1] else None


def _qparams_hazard(plan: Any, writers: Writers, args: list[int]) -> str | None:
    for which, (zeros_at, scales_at) in zip("qkv", QPARAM_PAIRS, strict=True):
        zeros, scales = _tensor(plan, args[zeros_at]), _tensor(plan, args[scales_at])
        pair = (args[zeros_at], args[scales_at])
        if zeros is None and scales is None:
            continue  # a float query: no quantization parameters
        if zeros is None or scales is None or list(zeros.sizes) != list(scales.sizes):
            return f"its {which} zero points and scales differ in shape"
        if not zeros.sizes or int(zeros.sizes[-1]) != 1:
            return f"its {which} zero points and scales are not one per row"
        rows = {_dim_bound(plan, writers, set(plan.inputs), at, -1) for at in pair}
        if rows != {1}:
            return f"its {which} zero points or scales may be resized past one per row"
    return None


def _dim_bound(
    plan: Any, writers: Writers, inputs: set[int], value: int, dim: int, depth: int = 0
) -> int | None:
    """The largest size dimension ``dim`` of tensor value ``value`` can have when the kernel
    runs (None: not known): its planned one where that is fixed (a static tensor, or an
    input, which pteforge checks dimension by dimension), else the constant a view gives it,
    or 1 for a per-token quantization parameter's last, through operators that keep their
    input's shape."""
    tensor = _tensor(plan, value)
    if tensor is None or not tensor.sizes or depth > _MAX_DEPTH:
        return None
    if _static(tensor) or (value in inputs and value not in writers):
        return int(tensor.sizes[dim])
    calls = writers.get(value, [])
    if len(calls) != 1:
        return None
    name, args = calls[0]
    if name in VIEW_OPERATORS and len(args) == 3:
        items = getattr(_value(plan, args[1]), "items", None)
        return _constant(plan, writers, items[dim]) if items else None
    if name in SHAPE_KEEPING:
        return _dim_bound(plan, writers, inputs, args[0], dim, depth + 1)
    return 1 if name in QPARAM_PRODUCERS and dim == -1 else None


def _constant(plan: Any, writers: Writers, value: int) -> int | None:
    """The value of ``Int`` value ``value`` if no instruction writes it and it is >= 0."""
    number = getattr(_value(plan, value), "int_val", None)
    if value in writers or not isinstance(number, int) or number < 0:
        return None
    return number


def _value(plan: Any, value: int) -> Any:
    """What value ``value`` of ``plan`` holds (None: no such value)."""
    return plan.values[value].val if 0 <= value < len(plan.values) else None


def _tensor(plan: Any, value: int) -> Any:
    """Value ``value`` of ``plan`` if it is a tensor (None: not one)."""
    held = _value(plan, value)
    return held if hasattr(held, "sizes") and hasattr(held, "shape_dynamism") else None


def _static(tensor: Any) -> bool:
    dynamism = tensor.shape_dynamism
    return int(getattr(dynamism, "value", dynamism)) == _STATIC
