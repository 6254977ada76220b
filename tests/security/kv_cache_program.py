"""A tiny program on upstream's LLM custom operators, for hostile positions (issue: hostile
shapes through the llama custom ops).

``forward(q, k, v, input_pos)`` writes ``k`` and ``v`` into a KV cache held in mutable
buffers at ``input_pos[0]`` (``llama::update_cache``) and attends over it
(``llama::custom_sdpa``, causal), as ``export_llama``'s attention does; ``attend(q,
input_pos)`` only attends over an empty cache (``custom_sdpa`` alone). Heads 2, head size
4, a cache of :data:`CACHE_LEN` positions, one position per call.

:func:`build_writer` builds one-method programs whose ``update_cache`` position is not
``input_pos[0]`` unchanged (:data:`WRITERS`): computed, narrowed to ``int32``, a constant.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

CACHE_LEN = 8
SHAPE = (1, 1, 2, 4)
"""Batch, positions per call, heads, head size of q, k and v."""


def _register() -> None:
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (the llama:: ops)


class KvCache(nn.Module):
    """``forward``: one step of cached attention at ``input_pos[0]``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, CACHE_LEN, *SHAPE[2:]))
        self.register_buffer("v_cache", torch.zeros(1, CACHE_LEN, *SHAPE[2:]))

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, input_pos: torch.Tensor
    ) -> torch.Tensor:
        start = input_pos[0].item()
        torch._check(start >= 0)
        torch._check(start < CACHE_LEN)
        torch.ops.llama.update_cache(k, self.k_cache, start)
        torch.ops.llama.update_cache(v, self.v_cache, start)
        return torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, start, None, 0.0, True)


class AttendOnly(KvCache):
    """``attend``: ``custom_sdpa`` over the (never written) cache at ``input_pos[0]``."""

    def forward(self, q: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        start = input_pos[0].item()
        torch._check(start >= 0)
        torch._check(start < CACHE_LEN)
        return torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, start, None, 0.0, True)


def eager_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: int) -> torch.Tensor:
    """``forward`` of a fresh :class:`KvCache` in eager PyTorch."""
    _register()
    with torch.no_grad():
        return KvCache()(q, k, v, torch.tensor([pos]))


def build(path: Path) -> Path:
    """Export both methods and lower them (portable kernels) into the ``.pte`` ``path``."""
    _register()
    from executorch.exir import to_edge_transform_and_lower

    q = torch.zeros(SHAPE)
    pos = torch.tensor([0])
    programs = {
        "forward": torch.export.export(KvCache(), (q, q, q, pos), strict=False),
        "attend": torch.export.export(AttendOnly(), (q, pos), strict=False),
    }
    path.write_bytes(to_edge_transform_and_lower(programs).to_executorch().buffer)
    return path


class ShiftedWrite(KvCache):
    """Writes at ``input_pos[0] - 1``: exported with ``start >= 1``, which ExecuTorch drops,
    so ``input_pos`` 0 (an input no check refuses) writes before the cache."""

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, input_pos: torch.Tensor
    ) -> torch.Tensor:
        start = input_pos[0].item()
        torch._check(start >= 1)
        torch._check(start <= CACHE_LEN)
        torch.ops.llama.update_cache(k, self.k_cache, start - 1)
        return self.k_cache + 0


class NarrowedWrite(KvCache):
    """Writes at ``input_pos`` cast to ``int32``: 2**32 - 1 (not negative) becomes -1."""

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, input_pos: torch.Tensor
    ) -> torch.Tensor:
        start = input_pos.to(torch.int32)[0].item()
        torch._check(start >= 0)
        torch._check(start < CACHE_LEN)
        torch.ops.llama.update_cache(k, self.k_cache, start)
        return self.k_cache + 0


class ConstantWrite(KvCache):
    """Writes at position 3 (a constant in the program)."""

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, input_pos: torch.Tensor
    ) -> torch.Tensor:
        torch.ops.llama.update_cache(k, self.k_cache, 3)
        return self.k_cache + input_pos[0]


WRITERS: dict[str, Callable[[], nn.Module]] = {
    "shifted": ShiftedWrite, "narrowed": NarrowedWrite, "constant": ConstantWrite,
}  # fmt: skip


def build_writer(kind: str, path: Path) -> Path:
    """Export ``WRITERS[kind]`` as method ``forward`` into the ``.pte`` ``path``."""
    _register()
    from executorch.exir import to_edge_transform_and_lower

    q = torch.zeros(SHAPE)
    program = torch.export.export(WRITERS[kind](), (q, q, q, torch.tensor([1])), strict=False)
    path.write_bytes(to_edge_transform_and_lower({"forward": program}).to_executorch().buffer)
    return path


def with_constant_position(pte: Path, position: int, target: Path) -> Path:
    """A copy of the ``constant`` writer's ``pte`` writing at ``position`` instead (export
    refuses a negative constant; a hand-made program is not exported)."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    program = deserialize_pte_binary(pte.read_bytes())
    plan: Any = program.program.execution_plan[0]
    (call,) = [
        i.instr_args
        for i in plan.chains[0].instructions
        if getattr(i.instr_args, "op_index", None) is not None
        and plan.operators[i.instr_args.op_index].name == "llama::update_cache"
    ]
    plan.values[call.args[2]].val.int_val = position
    target.write_bytes(bytes(serialize_pte_binary(program)))
    return target
