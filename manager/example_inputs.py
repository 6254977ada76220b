"""The inputs a method runs on when pteforge runs it without being given any: the numerics
check, calibration without calibration tensors, and profile jobs.

They are the exported program's example inputs where it keeps them (``"example"``: they
match its input structure, keyword inputs too, as ``transformers`` models are exported with
``input_ids=...``), else inputs generated from its input specs (``"generated"``: floats
``randn`` with a fixed seed, integers zero so that ids and indices stay in range, booleans
true; a symbolic dimension takes its export-time hint, else its lower bound).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ConstantArgument, InputKind
from torch.utils import _pytree as pytree

_SEED = 0


def method_inputs(program: ExportedProgram) -> tuple[list[Any], str]:
    """Flat user inputs of ``program``: its example inputs where it keeps them (and they
    match its input structure), else inputs generated from its input specs."""
    example = program.example_inputs
    if example is not None:
        from torch.export._tree_utils import reorder_kwargs

        try:
            args, kwargs = example
            flat, spec = pytree.tree_flatten(
                (args, reorder_kwargs(kwargs, program.call_spec.in_spec))
            )
        except (TypeError, ValueError, KeyError):
            spec = None
        if spec == program.call_spec.in_spec:
            return flat, "example"
    return _generated_inputs(program), "generated"


def _generated_inputs(program: ExportedProgram) -> list[Any]:
    values = {n.name: n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"}
    generator = torch.Generator().manual_seed(_SEED)
    flat: list[Any] = []
    for spec in program.graph_signature.input_specs:
        if spec.kind != InputKind.USER_INPUT:
            continue
        if isinstance(spec.arg, ConstantArgument):
            flat.append(spec.arg.value)
            continue
        fake = values[spec.arg.name]
        shape = [_concrete(d, program) for d in fake.shape]
        flat.append(_tensor(fake.dtype, shape, generator))
    return flat


def _concrete(dim: Any, program: ExportedProgram) -> int:
    """A size for one (possibly symbolic) dimension: its export-time hint, else its lower bound."""
    if isinstance(dim, int):
        return dim
    hint = getattr(dim.node, "hint", None)
    if isinstance(hint, int):
        return hint
    bounds = program.range_constraints.get(dim.node.expr)
    lower = int(bounds.lower) if bounds is not None else 1
    return max(lower, 1)


def _tensor(dtype: torch.dtype, shape: list[int], generator: torch.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.ones(shape, dtype=torch.bool)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=generator).to(dtype)
    return torch.zeros(shape, dtype=dtype)
