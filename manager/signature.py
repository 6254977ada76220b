"""Input and output tensor specs of an exported method (for clients and the service).

The types are the shared contracts (:mod:`pteforge.contracts.specs`); this module reads them
from a live ``torch.export`` program.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import sympy
import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import is_concrete_int

from pteforge.contracts.specs import (
    DYNAMIC_DIM,
    ConstantInput,
    DynamicDim,
    MethodSignature,
    TensorSpec,
)

__all__ = [
    "MethodSignature",
    "TensorSpec",
    "fixed_by_lowering",
    "fixed_dimensions",
    "method_signature",
    "tensor_spec",
]


def tensor_spec(name: str, value: Any, ranges: Mapping[Any, Any] | None = None) -> TensorSpec:
    """The spec of one graph value: a tensor's dtype and shape (``-1`` for symbolic dims),
    or for a constant its Python type name and no shape. ``ranges``, a program's
    ``range_constraints``, gives each dimension that is one plain symbol its range."""
    if not isinstance(value, torch.Tensor):
        return TensorSpec(name, type(value).__name__, ())
    shape = tuple(d if isinstance(d, int) else DYNAMIC_DIM for d in value.shape)
    dims = _dynamic_dims(value.shape, ranges or {})
    return TensorSpec(name, str(value.dtype).removeprefix("torch."), shape, None, dims)


def _dynamic_dims(shape: Any, ranges: Mapping[Any, Any]) -> tuple[DynamicDim, ...] | None:
    """Each dimension that is one symbol, with the range torch.export recorded for it, and
    each that is an expression it recorded one for (a derived ``Dim``: ``384*s69 - 256``
    audio samples), named by that expression; not one such as ``2*s0`` it has no range for."""
    dims = []
    for axis, size in enumerate(shape):
        expr = getattr(getattr(size, "node", None), "expr", None)
        if not isinstance(expr, sympy.Symbol) and not (
            isinstance(expr, sympy.Expr) and expr in ranges
        ):
            continue
        known = ranges.get(expr)
        low = _bound(getattr(known, "lower", None))
        dims.append(DynamicDim(axis, str(expr), low or 0, _bound(getattr(known, "upper", None))))
    return tuple(dims) or None


def _bound(value: Any) -> int | None:
    """A range bound as an int; None for an infinite (or missing) one."""
    return int(value) if isinstance(value, (int, sympy.Integer)) else None


def method_signature(
    name: str, program: ExportedProgram, *, tensors_only: bool = False
) -> MethodSignature:
    """Specs of ``program``'s user inputs and outputs, named as its graph signature names them.

    Inputs torch.export specialised to constants (a Python ``bool``, ``int``, ``float``,
    string or None keyword) are the signature's ``constants``, with their place and value:
    the emitted method still takes them positionally, and the runtime fills them in. Any
    other non-tensor input keeps its place with its type as dtype, unless ``tensors_only``.
    """
    from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

    values = {n.name: n.meta.get("val") for n in program.graph.nodes}
    signature = program.graph_signature
    ranges = program.range_constraints
    users = [s for s in signature.input_specs if s.kind == InputKind.USER_INPUT]
    constants = tuple(
        ConstantInput(index, s.arg.name, s.arg.value)
        for index, s in enumerate(users)
        if _is_constant(s.arg)
    )
    held = {c.name for c in constants}

    def specs(arg_specs: Any, skipped: set[str]) -> tuple[TensorSpec, ...]:
        return tuple(
            tensor_spec(s.arg.name, values.get(s.arg.name, getattr(s.arg, "value", None)), ranges)
            for s in arg_specs
            if s.arg.name not in skipped and (not tensors_only or isinstance(s.arg, TensorArgument))
        )

    outputs = [s for s in signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    return MethodSignature(name, specs(users, held), specs(outputs, set()), constants or None)


def _is_constant(arg: Any) -> bool:
    """Whether a graph-signature argument is a constant the signature can hold."""
    from torch.export.graph_signature import ConstantArgument

    kinds = (bool, int, float, str, type(None))
    return isinstance(arg, ConstantArgument) and type(arg.value) in kinds


def fixed_by_lowering(signature: MethodSignature, lowered: ExportedProgram) -> MethodSignature:
    """``signature`` (the program's, as exported) with each dynamic dimension that lowering
    made static given the one size the ``.pte`` takes: ``min`` = ``max`` = that size.

    ExecuTorch 1.5.1's ``to_edge`` does that to a dimension its edge-operator check reads
    with ``len()`` (the first dimension of a ``split``'s input: LeViT's batch): the edge
    program, and so the ``.pte``, takes only the example input's size there. Dimensions
    are matched by symbol, so the outputs and every input sharing one are fixed alike.
    """
    values = {n.name: n.meta.get("val") for n in lowered.graph.nodes if n.op == "placeholder"}
    sizes: dict[str, int] = {}
    for spec in signature.inputs:
        value = values.get(spec.name)
        if isinstance(value, torch.Tensor) and value.dim() == len(spec.shape):
            for dim in spec.dynamic_dims or ():
                if is_concrete_int(value.shape[dim.axis]):  # a plain int, or a SymInt of one
                    sizes[dim.symbol] = int(value.shape[dim.axis])
    if not sizes:
        return signature
    inputs = tuple(_fixed(spec, sizes) for spec in signature.inputs)
    outputs = tuple(_fixed(spec, sizes) for spec in signature.outputs)
    return replace(signature, inputs=inputs, outputs=outputs)


def _fixed(spec: TensorSpec, sizes: Mapping[str, int]) -> TensorSpec:
    if not spec.dynamic_dims:
        return spec
    dims = tuple(
        replace(d, min=sizes[d.symbol], max=sizes[d.symbol]) if d.symbol in sizes else d
        for d in spec.dynamic_dims
    )
    return replace(spec, dynamic_dims=dims)


def fixed_dimensions(lowered: MethodSignature) -> list[str]:
    """One phrase per input dimension :func:`fixed_by_lowering` fixed in ``lowered``: one
    whose range is a single size, which ``torch.export`` never gives a ``Dim``. (The range it
    was exported with is gone by then: lowering fixes it in the program's own shape env.)"""
    return [
        f"input {spec.name!r} dimension {dim.axis}, exported dynamic, was fixed at "
        f"{dim.min} by lowering"
        for spec in lowered.inputs
        for dim in spec.dynamic_dims or ()
        if dim.min == dim.max
    ]
