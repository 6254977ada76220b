"""Which operator of a program a backend cannot take, found with the backend's partitioner,
a partitioner that refuses quantized and dynamic programs, and one that refuses float ones.
Lowering-side only: this module imports ``exir``, which the HTTP process never loads."""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from typing import Any

import torch
from executorch.exir.backend.partitioner import Partitioner, PartitionResult
from torch.export import ExportedProgram

from pteforge.backends.coreml import COREML_BACKEND_ID, CoreMLEntry
from pteforge.backends.errors import UnsupportedNodeError
from pteforge.backends.ethos_u import FLOAT_REFUSAL
from pteforge.backends.openvino import DYNAMIC_REFUSAL, INT8_REFUSAL
from pteforge.backends.xnnpack import XNNPACK_BACKEND_ID, XnnpackEntry

# Backends whose catalog partitioner tags exactly the nodes the backend supports.
_SUPPORT_PARTITIONERS: dict[str, Callable[[], Partitioner]] = {
    XNNPACK_BACKEND_ID: lambda: XnnpackEntry().partitioner(),
    COREML_BACKEND_ID: lambda: CoreMLEntry().partitioner(),
}


def first_unsupported_node(backend_id: str, program: ExportedProgram) -> torch.fx.Node | None:
    """The first ``call_function`` node of ``program`` (an edge program) ``backend_id`` rejects.

    Runs the backend's partitioner on a copy and returns the first compute node (graph order)
    it left untagged, as a node of ``program`` itself. ``None`` when every node is supported,
    or when pteforge has no support check for ``backend_id``.
    """
    factory = _SUPPORT_PARTITIONERS.get(backend_id)
    if factory is None:
        return None
    tagged = factory().partition(copy.deepcopy(program)).tagged_exported_program
    tagged_names = {
        node.name for node in tagged.graph.nodes if node.meta.get("delegation_tag") is not None
    }
    for node in program.graph.nodes:
        if _is_compute(node) and node.name not in tagged_names:
            return node
    return None


def _is_compute(node: torch.fx.Node) -> bool:
    # getitem only unpacks a tuple; partitioners leave it untagged when its producer is.
    return node.op == "call_function" and node.target is not operator.getitem


class FloatStaticOnly(Partitioner):
    """``inner``, refusing a program that holds quantize/dequantize operators or has an
    input with a dynamic dimension."""

    def __init__(self, inner: Partitioner) -> None:
        super().__init__()
        self.inner = inner
        self.delegation_spec = inner.delegation_spec

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """``inner``'s partition; a quantized or dynamic program raises
        ``UnsupportedNodeError``."""
        quantized = first_quantized_node(exported_program)
        if quantized is not None:
            raise UnsupportedNodeError(INT8_REFUSAL, quantized.name, _target_name(quantized))
        dynamic = first_dynamic_input(exported_program)
        if dynamic is not None:
            shape = list(dynamic.meta["val"].shape)
            raise UnsupportedNodeError(DYNAMIC_REFUSAL, dynamic.name, f"input of shape {shape}")
        return self.inner.partition(exported_program)

    def ops_to_not_decompose(self, ep: ExportedProgram) -> Any:
        """``inner``'s operators kept whole through ``to_edge_transform_and_lower``."""
        return self.inner.ops_to_not_decompose(ep)


class QuantizedOnly(Partitioner):
    """``inner`` (a backend that computes in integers), refusing a program with no
    quantize/dequantize operator: it would delegate nothing, silently."""

    def __init__(self, inner: Partitioner) -> None:
        super().__init__()
        self.inner = inner
        self.delegation_spec = inner.delegation_spec

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """``inner``'s partition; a float program raises ``UnsupportedNodeError`` naming its
        first operator and the recipe that quantizes it."""
        first = next((n for n in exported_program.graph.nodes if _is_compute(n)), None)
        if first is not None and first_quantized_node(exported_program) is None:
            raise UnsupportedNodeError(FLOAT_REFUSAL, first.name, _target_name(first))
        return self.inner.partition(exported_program)

    def ops_to_not_decompose(self, ep: ExportedProgram) -> Any:
        """``inner``'s operators kept whole through ``to_edge_transform_and_lower``."""
        return self.inner.ops_to_not_decompose(ep)


_QUANT_MARKERS = ("quantize_per_", "quantize_affine", "choose_qparams")


def first_quantized_node(program: ExportedProgram) -> torch.fx.Node | None:
    """The first quantize/dequantize call of ``program``, else None."""
    for node in program.graph.nodes:
        if node.op == "call_function" and any(m in _target_name(node) for m in _QUANT_MARKERS):
            return node
    return None


def first_dynamic_input(program: ExportedProgram) -> torch.fx.Node | None:
    """The first user input of ``program`` with a symbolic dimension, else None."""
    inputs = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        value = node.meta.get("val")
        if node.op != "placeholder" or node.name not in inputs:
            continue
        if isinstance(value, torch.Tensor) and not all(isinstance(s, int) for s in value.shape):
            return node
    return None


def _target_name(node: torch.fx.Node) -> str:
    return str(getattr(node.target, "__name__", node.target))
