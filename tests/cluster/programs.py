"""Tiny distinct programs for cluster tests: every seed gives other weights, so each
upload is a new program and each compile really lowers."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.models import MLP, export_methods

INPUT = torch.ones(1, 16)


def tiny_program_file(directory: Path, seed: int) -> Path:
    """A one-method (``forward``) small MLP with seeded weights, saved as a ``.pt2``."""
    torch.manual_seed(seed)
    exported = export_methods(MLP(), {"forward": (INPUT,)})
    path = directory / f"mlp{seed}.pt2"
    torch.export.save(exported.programs["forward"], path)
    return path


def eager_output(seed: int) -> torch.Tensor:
    """What the program of ``seed`` computes on ``INPUT``, in eager PyTorch."""
    torch.manual_seed(seed)
    with torch.no_grad():
        return MLP().eval()(INPUT)
