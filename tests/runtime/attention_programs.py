"""Tiny programs on upstream's attention kernels whose tensor shapes let them read or write
past their tensors (``runtime/attention_shapes.py``), and their well-shaped twins.

Each is ``forward(q)`` (``forward(q, k)`` for :class:`ShortSeqLen`) over KV caches of
:data:`CACHE_LEN` positions, 2 heads of size 4, held in buffers, beside a buffer of
:data:`SECRET` values planned after them: a kernel reading past the value cache answers it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

CACHE_LEN = 8
SECRET = 42.0


class CachedAttention(nn.Module):
    """``custom_sdpa`` at the caches' last position over caches of ``batch`` rows."""

    def __init__(self, batch: int = 1) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.ones(batch, CACHE_LEN, 2, 4))
        self.register_buffer("v_cache", torch.full((batch, CACHE_LEN, 2, 4), 3.0))
        self.register_buffer("secret", torch.full((batch, CACHE_LEN, 2, 4), SECRET))

    def forward(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self.k_cache, self.v_cache
        out = torch.ops.llama.custom_sdpa(q, k, v, CACHE_LEN - 1, None, 0.0, True)
        return out, self.secret + 0


class QuantizedAttention(nn.Module):
    """``custom_quantized_sdpa`` whose zero points are ``width`` wide, its scales 1."""

    def __init__(self, width: int) -> None:
        super().__init__()
        shape = (1, CACHE_LEN, 2)
        self.register_buffer("k_cache", torch.ones(*shape, 4, dtype=torch.int8))
        self.register_buffer("v_cache", torch.ones(*shape, 4, dtype=torch.int8))
        self.register_buffer("k_zeros", torch.zeros(*shape, width, dtype=torch.int8))
        self.register_buffer("v_zeros", torch.zeros(*shape, width, dtype=torch.int8))
        self.register_buffer("k_scales", torch.ones(*shape, 1))
        self.register_buffer("v_scales", torch.ones(*shape, 1))
        self.register_buffer("q_zeros", torch.zeros(1, 1, 2, width, dtype=torch.int8))
        self.register_buffer("q_scales", torch.ones(1, 1, 2, 1))

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return self.attend(q, self.q_zeros)

    def attend(self, q: torch.Tensor, q_zeros: torch.Tensor) -> torch.Tensor:
        """The attention, with the query's zero points ``q_zeros``."""
        k, v = self.k_cache, self.v_cache
        return torch.ops.llama.custom_quantized_sdpa(
            q, k, v, CACHE_LEN - 1, None, 0.0, True, None, q_zeros, self.q_scales,
            self.k_zeros, self.k_scales, self.v_zeros, self.v_scales,
        )  # fmt: skip


class ShortSeqLen(CachedAttention):
    """``sdpa_with_kv_cache`` told ``seq_len`` 1 for a key of 4 positions at the last one."""

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        kc, vc = self.k_cache, self.v_cache
        out = torch.ops.llama.sdpa_with_kv_cache(q, k, k, kc, vc, CACHE_LEN - 1, 1, None, 0.0, True)
        return out, self.secret + 0


class ViewedQuery(CachedAttention):
    """``custom_sdpa`` at position 0 of a query viewed from ``x`` (``[1, positions, 8]``,
    positions dynamic up to :data:`CACHE_LEN`): ``[1, positions, 2, 4]``, or, ``hostile``,
    ``[positions, 1, 2, 4]``, a batch only known at run time."""

    def __init__(self, hostile: bool) -> None:
        super().__init__()
        self.hostile = hostile

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        positions = x.shape[1]
        shape = (positions, 1, 2, 4) if self.hostile else (1, positions, 2, 4)
        out = torch.ops.llama.custom_sdpa(x.view(shape), self.k_cache, self.v_cache, 0)
        return out, self.secret + 0


class ScaledQuery(CachedAttention):
    """:class:`ViewedQuery`'s well-shaped query, scaled: an operator XNNPACK takes."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = x.view(1, x.shape[1], 2, 4) * 2.0
        return torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, 0), self.secret + 0


def build(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], path: Path, xnnpack: bool = False
) -> Path:
    """Export ``model`` on ``inputs`` and lower it (portable kernels, or XNNPACK where it
    takes an operator) into ``path``; a :class:`ViewedQuery` with ``x``'s positions dynamic."""
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (the llama:: ops)
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    dims = {"x": {1: torch.export.Dim("positions", max=CACHE_LEN)}}
    shapes = {
        ViewedQuery: dims,
        ScaledQuery: dims,
        SlicedCaches: {**dims, "input_pos": None},
        ComputedQueryZeros: {"q": None, "zeros": {3: torch.export.Dim("width", max=CACHE_LEN)}},
    }.get(type(model))
    program = torch.export.export(model, inputs, dynamic_shapes=shapes, strict=False)
    partitioners = [XnnpackPartitioner()] if xnnpack else None
    lowered = to_edge_transform_and_lower(program, partitioner=partitioners)
    path.write_bytes(lowered.to_executorch().buffer)
    return path


class SlicedCaches(CachedAttention):
    """Attention shaped as Gemma 4's export shapes it: a query viewed from ``x`` (``[1,
    positions, 8]``, positions dynamic), normalized and rotated (elementwise operators, a
    mean, a concatenation), over the caches' first ``input_pos[0] + positions``, sliced."""

    def forward(
        self, x: torch.Tensor, input_pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        start = input_pos[0].item()
        torch._check(start >= 0)
        torch._check(start + x.shape[1] <= CACHE_LEN)
        q = x.view(1, x.shape[1], 2, 4)
        q = q * torch.rsqrt((q * q).mean(-1, keepdim=True) + 1e-6)
        q = torch.cat([-q[..., 2:], q[..., :2]], dim=-1) * 0.5 + q
        length = start + x.shape[1]
        k, v = (cache.narrow(1, 0, length) for cache in (self.k_cache, self.v_cache))
        return torch.ops.llama.custom_sdpa(q, k, v, start, None, 0.0, True), self.secret + 0


class ComputedQueryZeros(QuantizedAttention):
    """``custom_quantized_sdpa`` whose query zero points the method computes from ``zeros``
    (``[1, 1, 2, width]``, width dynamic up to :data:`CACHE_LEN`)."""

    def __init__(self) -> None:
        super().__init__(1)

    def forward(self, q: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.attend(q, zeros * 1)


def with_argument_planned(
    pte: Path, operator: str, index: int, sizes: list[int], target: Path
) -> Path:
    """A copy of ``pte`` whose ``operator`` argument ``index`` is planned as ``sizes``, as a
    hand-made program may say."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    program = deserialize_pte_binary(pte.read_bytes())
    plan = program.program.execution_plan[0]
    names = [op.name for op in plan.operators]
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            if names[getattr(call, "op_index", 0)] == operator:
                plan.values[call.args[index]].val.sizes = sizes
    target.write_bytes(bytes(serialize_pte_binary(program, extract_delegate_segments=True)))
    return target


def with_value_sliced_to(pte: Path, end: int, target: Path) -> Path:
    """A copy of :class:`SlicedCaches`' ``pte`` whose value is sliced to ``end`` positions
    while its key keeps its own slice."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
    from executorch.exir.schema import EValue, Int

    program = deserialize_pte_binary(pte.read_bytes())
    plan = program.program.execution_plan[0]
    names = [op.name for op in plan.operators]
    calls = [i.instr_args for c in plan.chains for i in c.instructions]
    calls = [c for c in calls if hasattr(c, "op_index")]
    value = next(c.args[2] for c in calls if names[c.op_index] == "llama::custom_sdpa")
    plan.values.append(EValue(val=Int(int_val=end)))
    for call in calls:
        if names[call.op_index] == "aten::slice_copy" and call.args[-1] == value:
            call.args[3] = len(plan.values) - 1
    target.write_bytes(bytes(serialize_pte_binary(program, extract_delegate_segments=True)))
    return target
