"""Programs whose constants live in a ``.ptd`` beside the ``.pte`` (ExecuTorch's program-data
separation: ``ExecutorchBackendConfig(external_constants=True)``), as exporters of LoRA
adapters over one foundation write them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tests.generation.lm_builder import LmFiles
from tests.models import MultiMethod, SharedLinearPair, export_methods


@dataclass(frozen=True)
class SeparatedProgram:
    """A ``.pte`` without its constants, the ``.ptd`` holding them, and the eager model."""

    pte: Path
    ptd: Path
    model: MultiMethod


def separated_program(
    directory: Path, seed: int, features: int = 8, xnnpack: bool = False
) -> SeparatedProgram:
    """Two methods (``encode``, ``decode``) sharing a linear layer, exported with random
    weights from ``seed`` and the constants written to a ``.ptd``: on portable kernels (the
    same architecture under another seed gives a byte-identical ``.pte``), or ``xnnpack``
    with XNNPACK's external weights (tagged as upstream's LLM export tags them)."""
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    torch.manual_seed(seed)
    x = torch.randn(2, features)
    model = export_methods(SharedLinearPair(features), {"encode": (x,), "decode": (x,)})
    config = ExecutorchBackendConfig(external_constants=True)
    if xnnpack:
        program = _xnnpack(model, config)
    else:
        program = to_edge_transform_and_lower(model.programs).to_executorch(config)
    directory.mkdir(parents=True, exist_ok=True)
    pte = directory / "model.pte"
    pte.write_bytes(program.buffer)
    program.write_tensor_data_to_file(str(directory))
    (ptd,) = directory.glob("*.ptd")
    return SeparatedProgram(pte, ptd, model)


def _xnnpack(model: MultiMethod, config: Any) -> Any:
    """Each method re-exported with its weights tagged for the delegate's external data
    (``delegate_external_constants_pass_unlifted``), then lowered to XNNPACK."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.passes.external_constants_pass import (
        delegate_external_constants_pass_unlifted,
    )

    programs = {}
    for name, exported in model.programs.items():
        module = exported.module()
        delegate_external_constants_pass_unlifted(module, gen_tag_fn=lambda _: "model")
        programs[name] = torch.export.export(module, model.inputs[name])
    lowered = to_edge_transform_and_lower(programs, partitioner=[XnnpackPartitioner()])
    return lowered.to_executorch(config)


def separated_lm(lm: LmFiles, directory: Path) -> tuple[Path, Path]:
    """``lm``'s model exported again in the LLM runner convention with its constants in a
    ``.ptd`` (portable kernels, as a CUDA or LoRA export leaves the weights outside):
    the ``.pte`` and the ``.ptd``."""
    from executorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass

    from tests.generation import lm_export

    program = lm_export.export_lm(lm.eager, lm.max_seq_len, dynamic=True)
    edge = to_edge_transform_and_lower(
        program,
        constant_methods=lm.metadata,
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
    )
    config = ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False),
        sym_shape_eval_pass=ConstraintBasedSymShapeEvalPass(),
        external_constants=True,
    )
    lowered = edge.to_executorch(config)
    directory.mkdir(parents=True, exist_ok=True)
    pte = directory / "lm.pte"
    pte.write_bytes(lowered.buffer)
    lowered.write_tensor_data_to_file(str(directory))
    (ptd,) = directory.glob("*.ptd")
    return pte, ptd
