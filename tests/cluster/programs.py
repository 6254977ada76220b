"""Tiny distinct programs for cluster tests: every seed gives other weights, so each
upload is a new program and each compile really lowers."""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from tests.models import MLP, export_methods

INPUT = torch.ones(1, 16)
# Seeding sets torch's one global generator: two threads building models at once would draw
# each other's numbers (the load clients of test_fault compute their expected outputs in
# parallel), so seeding and building happen under one lock.
_SEEDED = threading.Lock()


def tiny_program_file(directory: Path, seed: int) -> Path:
    """A one-method (``forward``) small MLP with seeded weights, saved as a ``.pt2``."""
    with _SEEDED:
        torch.manual_seed(seed)
        model = MLP()
    exported = export_methods(model, {"forward": (INPUT,)})
    path = directory / f"mlp{seed}.pt2"
    torch.export.save(exported.programs["forward"], path)
    return path


def eager_output(seed: int) -> torch.Tensor:
    """What the program of ``seed`` computes on ``INPUT``, in eager PyTorch."""
    with _SEEDED:
        torch.manual_seed(seed)
        model = MLP().eval()
    with torch.no_grad():
        return model(INPUT)
