"""How mutable buffers are planned: shared across methods on request, initial values kept.

ExecuTorch plans a mutated buffer like any other memory and, by default, serialises only its
shape: the runtime starts it from whatever the arena holds (zeros in ``executorch.runtime``).
Buffers whose initial value is not all zeros are marked with upstream's
``InitializedMutableBufferPass``, so the ``.pte`` keeps their value and each method load
writes it back.

With ``share_mutable_buffers`` upstream's ``MemoryPlanningPass(share_mutable_buffers=True)``
places every mutable buffer once, in an arena all methods of the program address: ``prefill``
writes the cache that ``decode`` reads. A fresh pass is built for every call: the pass keeps
planning state across ``to_executorch`` calls, and reusing one (as upstream's shared default
instance is) plans a wrong arena.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from executorch.exir import ExecutorchBackendConfig
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind


def _initial_value(program: ExportedProgram, fqn: str) -> torch.Tensor | None:
    value = program.state_dict.get(fqn, program.constants.get(fqn))
    return value if isinstance(value, torch.Tensor) else None


def initialized_buffers(programs: Mapping[str, ExportedProgram]) -> list[str]:
    """Placeholder names, in any method, of buffers some method mutates and whose initial
    value is not all zeros (edge programs: mutations are explicit there)."""
    mutated = {
        fqn
        for program in programs.values()
        for fqn in program.graph_signature.buffers_to_mutate.values()
    }
    names: set[str] = set()
    for program in programs.values():
        for spec in program.graph_signature.input_specs:
            if spec.kind != InputKind.BUFFER or spec.target not in mutated:
                continue
            value = _initial_value(program, spec.target)
            if value is not None and bool(value.detach().ne(0).any()):
                names.add(spec.arg.name)
    return sorted(names)


def executorch_config(
    programs: Mapping[str, ExportedProgram], share_mutable_buffers: bool
) -> ExecutorchBackendConfig:
    """The emit configuration of one ``to_executorch`` call (never reuse it for another).

    ``InitializedMutableBufferPass`` matches placeholder names as substrings; a name that also
    matches another buffer only keeps that buffer's initial value too, which is still correct.
    """
    names = initialized_buffers(programs)
    return ExecutorchBackendConfig(
        passes=[InitializedMutableBufferPass(names)] if names else [],
        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=share_mutable_buffers),
        emit_mutable_buffer_names=share_mutable_buffers,
    )
