"""Input and output tensor specs of an exported method (for clients and the service)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch.export import ExportedProgram


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: dtype name (``float32``) and shape, -1 for dynamic dims."""

    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class MethodSignature:
    """The user-visible inputs and outputs of one method."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _spec(name: str, value: Any) -> TensorSpec:
    if not isinstance(value, torch.Tensor):
        return TensorSpec(name, type(value).__name__, ())
    shape = tuple(d if isinstance(d, int) else -1 for d in value.shape)
    return TensorSpec(name, str(value.dtype).removeprefix("torch."), shape)


def method_signature(name: str, program: ExportedProgram) -> MethodSignature:
    """Specs of ``program``'s user inputs and outputs, named as its graph signature names them.

    Inputs torch.export specialised to constants (a Python ``int``) keep their place and name,
    with the constant's type as dtype: the emitted method still takes them positionally.
    """
    from torch.export.graph_signature import InputKind, OutputKind

    values = {n.name: n.meta.get("val") for n in program.graph.nodes}
    signature = program.graph_signature
    inputs = tuple(
        _spec(s.arg.name, values.get(s.arg.name, getattr(s.arg, "value", None)))
        for s in signature.input_specs
        if s.kind == InputKind.USER_INPUT
    )
    outputs = tuple(
        _spec(s.arg.name, values.get(s.arg.name, getattr(s.arg, "value", None)))
        for s in signature.output_specs
        if s.kind == OutputKind.USER_OUTPUT
    )
    return MethodSignature(name, inputs, outputs)
