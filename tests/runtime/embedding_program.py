"""Tiny programs on upstream's quantized embedding kernels, for hostile indices.

``forward(indices)`` looks rows of a constant quantized weight up
(``quantized_decomposed::embedding_byte``, ``embedding_4bit`` or ``embedding_2bit``, as the
LLM export's embedding quantization emits them) and dequantizes them, per row. The weight has
:data:`ROWS` rows of :data:`DIM` values; the indices reach the kernel as they are
(``direct``), viewed as ``(3,)`` (``view``: a static view, no instruction), cast to
``int32`` (``cast``: a copy) or computed (``computed``: no input check bounds them).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

ROWS, DIM = 16, 8
INDICES = torch.tensor([[0, 3, ROWS - 1]])
BITS = {"byte": 8, "4bit": 4, "2bit": 2}
_RANGE = {8: (-128, 127), 4: (-8, 7), 2: (-2, 1)}


class QuantizedEmbedding(nn.Module):
    """A :data:`ROWS` x :data:`DIM` embedding quantized to ``bits`` (packed below 8)."""

    def __init__(self, bits: int, route: str = "direct") -> None:
        super().__init__()
        import executorch.kernels.quantized  # noqa: F401  (the quantized_decomposed ops)

        generator = torch.Generator().manual_seed(bits)
        self.bits, self.route = bits, route
        self.quant_min, self.quant_max = _RANGE[bits]
        packed = torch.randint(0, 256, (ROWS, DIM * bits // 8), generator=generator)
        weight = packed.to(torch.int8) if bits == 8 else packed.to(torch.uint8)
        self.register_buffer("weight", weight)
        self.register_buffer("scales", torch.rand(ROWS, generator=generator) + 0.5)
        self.register_buffer("zero_points", torch.zeros(ROWS))

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        ops = torch.ops.quantized_decomposed
        lookup = {8: ops.embedding_byte, 4: ops.embedding_4bit, 2: ops.embedding_2bit}[self.bits]
        if self.route == "view":
            indices = indices.view(-1)
        elif self.route == "cast":
            indices = indices.to(torch.int32)
        elif self.route == "computed":
            indices = indices % ROWS  # in range here, but computed by the method
        return lookup(  # type: ignore[no-any-return]
            self.weight, self.scales, self.zero_points, self.quant_min, self.quant_max, indices
        )


def build(model: QuantizedEmbedding, path: Path) -> Path:
    """Export ``model`` on :data:`INDICES` to a portable ``.pte`` at ``path``."""
    from executorch.exir import EdgeCompileConfig, to_edge

    exported = torch.export.export(model, (INDICES,))
    config = EdgeCompileConfig(_check_ir_validity=False)  # quantized_decomposed is not core ATen
    path.write_bytes(to_edge(exported, compile_config=config).to_executorch().buffer)
    return path
