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
upstream export emits it any more); a query that may have a larger batch than the key or
the value; a value that may have fewer heads than the key, or a key fewer positions than
the value (the kernel takes the heads from the key, the positions from the value);
quantization parameters whose zero points and scales differ in shape or may not be one per
row. ExecuTorch bounds a dynamic tensor by its planned element count, not dimension by
dimension (a query planned as ``[1, 8, 2, 4]`` and viewed to ``[2, 1, 2, 4]`` read past
the caches), so each dimension is taken as run (:class:`tensor_dims.Dims`): fixed, an
input's, a view's constant, or the same slice of key and value (as Gemma 4's export slices
its caches); what it cannot tell is refused.
"""

from __future__ import annotations

from typing import Any

from pteforge.runtime.tensor_dims import Dims, at_most, tensor_of, value_of

REFUSED_OPERATORS = {
    "llama::sdpa_with_kv_cache": "its kernel bounds the cache write by its seq_len argument "
    "but copies the whole key and value, so a seq_len smaller than theirs writes past the cache"
}
"""Operators no method may call here, with why."""

SDPA_OPERATORS = {"llama::custom_sdpa": None, "llama::custom_quantized_sdpa": 14}
"""Attention over caches: ``(query, key, value, start_pos, ...)``, with the index of the
``is_seq_at_dim_2`` flag (None: positions at dimension 1, heads at 2)."""

QPARAM_PAIRS = ((8, 9), (10, 11), (12, 13))
"""``custom_quantized_sdpa``'s (zero points, scales) arguments of query, key and value."""


def attention_hazard(plan: Any) -> str | None:
    """Why a call in ``plan`` of an attention kernel may read or write past its tensors
    (None: none may)."""
    dims = Dims(plan)
    for at, name, args in dims.calls:
        why = REFUSED_OPERATORS.get(name)
        if why is None and name in SDPA_OPERATORS:
            why = _sdpa_hazard(dims, at, name, args)
        if why is not None:
            return f"it calls {name}, and {why}"
    return None


def _sdpa_hazard(dims: Dims, at: int, name: str, args: list[int]) -> str | None:
    """Why the call of ``name`` at instruction ``at`` may read past its tensors."""
    plan = dims.plan
    query, key, value = (tensor_of(plan, a) for a in [*args, -1, -1, -1][:3])
    if query is None or key is None or value is None:
        return "its query, key or value is not a tensor of the program"
    batch = dims.size(args[0], 0, at)
    if batch is None:
        return f"its kernel reads the caches at the query's batch, {_unbounded(dims, args[0])}"
    if not all(at_most(batch, dims.size(args[i], 0, at)) for i in (1, 2)):
        return (
            f"its query {list(query.sizes)} may have a larger batch than its key "
            f"{list(key.sizes)} or value {list(value.sizes)}, which its kernel reads past"
        )
    flag = SDPA_OPERATORS[name]
    seq_at_2 = getattr(value_of(plan, args[flag]), "bool_val", None) if flag else False
    if not isinstance(seq_at_2, bool):
        return "its is_seq_at_dim_2 is not a constant"
    heads, positions = (1, 2) if seq_at_2 else (2, 1)
    if not at_most(dims.size(args[1], heads, at), dims.size(args[2], heads, at)):
        return "its value may have fewer heads than its key when run, which its kernel trusts"
    if not at_most(dims.size(args[2], positions, at), dims.size(args[1], positions, at)):
        return "its key may hold fewer positions than its value when run, which its kernel trusts"
    return _qparams_hazard(dims, at, args) if flag and len(args) > flag else None


def _unbounded(dims: Dims, value: int) -> str:
    """What sets a dimension :class:`Dims` cannot bound, for the refusal's reason."""
    if any(name == "delegate" for name, _ in dims.writers.get(value, [])):
        return (
            "which a delegate's output sets, and pteforge cannot bound a delegate's output "
            "shapes (optimum-executorch's --use_custom_sdpa exports this: export without it, "
            "or with the query's view outside the delegate, as export_llama does)"
        )
    return "which the method computes at run time"


def _qparams_hazard(dims: Dims, at: int, args: list[int]) -> str | None:
    for which, (zeros_at, scales_at) in zip("qkv", QPARAM_PAIRS, strict=True):
        zeros, scales = (tensor_of(dims.plan, args[at]) for at in (zeros_at, scales_at))
        if zeros is None and scales is None:
            continue  # a float query: no quantization parameters
        if zeros is None or scales is None or list(zeros.sizes) != list(scales.sizes):
            return f"its {which} zero points and scales differ in shape"
        if not zeros.sizes or int(zeros.sizes[-1]) != 1:
            return f"its {which} zero points and scales are not one per row"
        if any(dims.size(args[i], -1, at) != ("n", 1) for i in (zeros_at, scales_at)):
            return f"its {which} zero points or scales may be resized past one per row"
    return None
