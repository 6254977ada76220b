"""Which operator of a program a backend cannot take, found with the backend's partitioner."""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable

import torch
from executorch.exir.backend.partitioner import Partitioner
from torch.export import ExportedProgram

from pteforge.backends.coreml import COREML_BACKEND_ID, CoreMLEntry
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
