"""Input and output tensor specs of an exported method (for clients and the service).

The types are the shared contracts (:mod:`pteforge.contracts.specs`); this module reads them
from a live ``torch.export`` program.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export import ExportedProgram

from pteforge.contracts.specs import DYNAMIC_DIM, MethodSignature, TensorSpec

__all__ = ["MethodSignature", "TensorSpec", "method_signature", "tensor_spec"]


def tensor_spec(name: str, value: Any) -> TensorSpec:
    """The spec of one graph value: a tensor's dtype and shape (``-1`` for symbolic dims),
    or for a constant its Python type name and no shape."""
    if not isinstance(value, torch.Tensor):
        return TensorSpec(name, type(value).__name__, ())
    shape = tuple(d if isinstance(d, int) else DYNAMIC_DIM for d in value.shape)
    return TensorSpec(name, str(value.dtype).removeprefix("torch."), shape)


def method_signature(
    name: str, program: ExportedProgram, *, tensors_only: bool = False
) -> MethodSignature:
    """Specs of ``program``'s user inputs and outputs, named as its graph signature names them.

    Inputs torch.export specialised to constants (a Python ``int``) keep their place and name,
    with the constant's type as dtype: the emitted method still takes them positionally.
    ``tensors_only`` leaves them out, as the sandbox's static reading of an archive does.
    """
    from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

    values = {n.name: n.meta.get("val") for n in program.graph.nodes}
    signature = program.graph_signature

    def specs(arg_specs: Any, kind: Any) -> tuple[TensorSpec, ...]:
        return tuple(
            tensor_spec(s.arg.name, values.get(s.arg.name, getattr(s.arg, "value", None)))
            for s in arg_specs
            if s.kind == kind and (not tensors_only or isinstance(s.arg, TensorArgument))
        )

    inputs = specs(signature.input_specs, InputKind.USER_INPUT)
    outputs = specs(signature.output_specs, OutputKind.USER_OUTPUT)
    return MethodSignature(name, inputs, outputs)
