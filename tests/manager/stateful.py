"""A two-method model whose methods share a mutable buffer (a KV cache in miniature)."""

from __future__ import annotations

import torch
from executorch.runtime import Runtime
from torch import nn

from tests.models import MultiMethod, export_methods


class CachedProjection(nn.Module):
    """``prefill`` writes a cache buffer, ``decode`` reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("cache", torch.full((2, 8), 0.5))

    def prefill(self, x: torch.Tensor) -> torch.Tensor:
        self.cache.copy_(self.proj(x))
        return x * 2

    def decode(self, y: torch.Tensor) -> torch.Tensor:
        return self.proj(self.cache) + y  # type: ignore[no-any-return]


def cached_programs() -> MultiMethod:
    torch.manual_seed(0)
    return export_methods(
        CachedProjection(), {"prefill": (torch.randn(2, 8),), "decode": (torch.randn(2, 8),)}
    )


def eager_prefill_then_decode(model: MultiMethod) -> torch.Tensor:
    """Eager ``decode`` after ``prefill`` on a fresh copy of the model."""
    eager = CachedProjection()
    eager.load_state_dict(model.eager["prefill"].model.state_dict())
    with torch.no_grad():
        eager.prefill(*model.inputs["prefill"])
        return eager.decode(*model.inputs["decode"])  # type: ignore[no-any-return]


def runtime_prefill_then_decode(pte: bytes, model: MultiMethod) -> torch.Tensor:
    """``prefill`` then ``decode`` on one loaded program. Every method is loaded before any
    runs: loading a method writes the buffers' initial values."""
    program = Runtime.get().load_program(pte)
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    prefill.execute(list(model.inputs["prefill"]))
    return decode.execute(list(model.inputs["decode"]))[0]  # type: ignore[no-any-return]
