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
    """Specs of ``program``'s user inputs and outputs, read from node metadata."""
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    inputs = tuple(
        _spec(arg, nodes[arg].meta.get("val")) for arg in program.graph_signature.user_inputs
    )
    output_node = program.graph.output_node()
    returned = output_node.args[0]
    user_outputs = program.graph_signature.user_outputs
    skip = len(returned) - len(user_outputs)  # mutated buffers come first
    outputs = tuple(
        _spec(out_name, getattr(node, "meta", {}).get("val", node))
        for out_name, node in zip(user_outputs, returned[skip:], strict=True)
    )
    return MethodSignature(name, inputs, outputs)
