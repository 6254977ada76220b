"""Stateful programs compiled the way the runtime tests and benchmarks need them."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.models import MultiMethod


@dataclass
class StatefulPte:
    """A compiled stateful program and the model it came from."""

    path: Path
    sha256: str
    model: MultiMethod


def compile_stateful(
    model: MultiMethod,
    path: Path,
    *,
    xnnpack: bool = True,
    share: bool = True,
    names: bool = True,
    initial: Sequence[str] = (),
) -> StatefulPte:
    """Compile with ``pteforge.manager``: XNNPACK partitioner (or portable), mutable buffers
    shared across methods (``share``), their names emitted (``names``), and ``initial``
    buffer-name patterns stored with their initial values."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    from pteforge.manager import to_edge

    edge = to_edge(model.programs)
    if xnnpack:
        edge = edge.to_backend(XnnpackPartitioner())
    config = ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=share),
        emit_mutable_buffer_names=names,
        passes=[InitializedMutableBufferPass(list(initial))] if initial else [],
    )
    data = edge.to_executorch(config).buffer
    path.write_bytes(data)
    return StatefulPte(path, hashlib.sha256(data).hexdigest(), model)
