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
zero points and scales differ in shape or are not one per row. The shapes are the planned
ones: a dynamic query is bounded by its planned size, which ExecuTorch enforces on its
element count, not on each dimension (docs/SECURITY.md, Known limits).
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

_STATIC = 0


def attention_hazard(plan: Any) -> str | None:
    """Why a call in ``plan`` of an attention kernel may read or write past its tensors
    (None: none may)."""
    names = [str(op.name) for op in plan.operators]
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            index = getattr(call, "op_index", -1)
            name = names[index] if 0 <= index < len(names) else ""
            why = REFUSED_OPERATORS.get(name)
            if why is None and name in SDPA_OPERATORS:
                why = _sdpa_hazard(plan, list(call.args))
            if why is not None:
                return f"it calls {name}, and {why}"
    return None


def _sdpa_hazard(plan: Any, args: list[int]) -> str | None:
    query, key, value = (_tensor(plan, a) for a in [*args, -1, -1, -1][:3])
    if query is None or key is None or value is None:
        return "its query, key or value is not a tensor of the program"
    if not (_static(key) and _static(value)):
        return "its key or value cache is not of fixed shape, which its kernel trusts"
    if list(key.sizes) != list(value.sizes):
        return f"its key {list(key.sizes)} and value {list(value.sizes)} differ in shape"
    if not query.sizes or not key.sizes or int(query.sizes[0]) > int(key.sizes[0]):
        return (
            f"its query {list(query.sizes)} has a larger batch than its key and value caches "
            f"{list(key.sizes)}, which its kernel reads past"
        )
    return _qparams_hazard(plan, args) if len(args) > QPARAM_PAIRS[-1][1] else None


def _qparams_hazard(plan: Any, args: list[int]) -> str | None:
    for which, (zeros_at, scales_at) in zip("qkv", QPARAM_PAIRS, strict=True):
        zeros, scales = _tensor(plan, args[zeros_at]), _tensor(plan, args[scales_at])
        if zeros is None and scales is None:
            continue  # a float query: no quantization parameters
        if zeros is None or scales is None or list(zeros.sizes) != list(scales.sizes):
            return f"its {which} zero points and scales differ in shape"
        if not zeros.sizes or int(zeros.sizes[-1]) != 1:
            return f"its {which} zero points and scales are not one per row"
        if which != "q" and not (_static(zeros) and _static(scales)):
            return f"its {which} zero points or scales are not of fixed shape"
    return None


def _tensor(plan: Any, value: int) -> Any:
    """Value ``value`` of ``plan`` if it is a tensor (None: not one)."""
    held = plan.values[value].val if 0 <= value < len(plan.values) else None
    return held if hasattr(held, "sizes") and hasattr(held, "shape_dynamism") else None


def _static(tensor: Any) -> bool:
    dynamism = tensor.shape_dynamism
    return int(getattr(dynamism, "value", dynamism)) == _STATIC
