"""Running ``.pte`` bytes in ``executorch.runtime`` and comparing with eager PyTorch."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from executorch.runtime import Runtime

from tests.models import MultiMethod


def run_method(pte: bytes, method: str, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Execute one method of ``pte`` in the native runtime."""
    program = Runtime.get().load_program(pte)
    return list(program.load_method(method).execute(list(inputs)))


def assert_runs_like_eager(
    pte: bytes, model: MultiMethod, atol: float = 1e-5, rtol: float = 1e-5
) -> None:
    """Every method of ``pte`` returns what eager PyTorch returns on the example inputs."""
    for method, inputs in model.inputs.items():
        got = run_method(pte, method, inputs)
        with torch.no_grad():
            expected = model.eager[method](*inputs)
        expected_list = list(expected) if isinstance(expected, tuple) else [expected]
        assert len(got) == len(expected_list), method
        for out, ref in zip(got, expected_list, strict=True):
            torch.testing.assert_close(out, ref, atol=atol, rtol=rtol, msg=method)


def parameter_bytes(module: torch.nn.Module) -> int:
    """Bytes of the distinct parameters of ``module``."""
    return sum(p.numel() * p.element_size() for p in module.parameters())
