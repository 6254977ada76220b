"""No false positives: programs using buffers, lifted constants, control flow, unbacked and
product symbols pass the allowlist and load."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from pteforge.server.sandbox import load_validated_programs, validate_pt2_archive
from pteforge.server.sandbox.pt2_loader import exported_method_spec

Dim = torch.export.Dim


class BufferAndConstant(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.register_buffer("scale", torch.full((1,), 2.0))
        self.offset = torch.tensor([1.0, 2.0])  # becomes a lifted tensor constant

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.bn(self.conv(x)) * self.scale, x.sum() + self.offset.sum()


class Cond(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))  # type: ignore[no-any-return]


class NonZero(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(x)


class Flatten(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.reshape(-1) * 2, x.transpose(0, 1).contiguous().view(x.shape[1], -1)


def _export(
    module: nn.Module, args: tuple[torch.Tensor, ...], dynamic: object = None
) -> torch.export.ExportedProgram:
    return torch.export.export(module.eval(), args, dynamic_shapes=dynamic)  # type: ignore[arg-type]


CASES: dict[str, Callable[[], torch.export.ExportedProgram]] = {
    "buffers_and_constants": lambda: _export(BufferAndConstant(), (torch.randn(1, 3, 8, 8),)),
    "cond_subgraphs": lambda: _export(Cond(), (torch.randn(3),)),
    "unbacked_symbol": lambda: _export(NonZero(), (torch.randn(6),)),
    "symbol_products": lambda: _export(
        Flatten(), (torch.randn(3, 4),), ({0: Dim("a", max=64), 1: Dim("b", max=64)},)
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_legitimate_program_passes_and_loads(case: str, tmp_path: Path) -> None:
    ep = CASES[case]()
    path = tmp_path / f"{case}.pt2"
    torch.export.save(ep, path)
    manifest = validate_pt2_archive(path)
    assert manifest.methods == (exported_method_spec("model", ep),)
    loaded = load_validated_programs(path)["model"]
    args = ep.example_inputs[0]
    for got, want in zip(
        torch.utils._pytree.tree_leaves(loaded.module()(*args)),
        torch.utils._pytree.tree_leaves(ep.module()(*args)),
        strict=True,
    ):
        torch.testing.assert_close(got, want)
