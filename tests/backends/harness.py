"""Helpers for the backend tests: a tiny model, lowering through an entry, running a .pte."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir.backend.backend_api import to_backend
from executorch.exir.backend.partitioner import Partitioner
from executorch.runtime import Runtime
from torch import nn

from pteforge.backends import (
    BaseEntry,
    DelegateEntryBase,
    EntryKind,
    EthosUEntry,
    PartitionerEntry,
    QuantizerEntryBase,
    XnnpackEntry,
    default_catalog,
)
from tests.models import MLP, MultiMethod, export_methods

# Options that lower the tiny model with each entry that has required options.
LOWERING_OPTIONS: dict[str, dict[str, object]] = {"delegate": {"backend_id": "XnnpackBackend"}}


def tiny_mlp_module() -> nn.Module:
    """Large enough (a batch of 8, 256 outputs) for int8 error statistics to mean something."""
    return MLP(32, 64, 32)


def tiny_mlp() -> MultiMethod:
    torch.manual_seed(0)
    return export_methods(tiny_mlp_module(), {"forward": (torch.randn(8, 32),)})


def calibration_set(
    example: tuple[torch.Tensor, ...], count: int = 4
) -> list[tuple[torch.Tensor, ...]]:
    """The example inputs plus ``count - 1`` random tuples of the same shapes."""
    generator = torch.Generator().manual_seed(1)
    extra = [
        tuple(torch.randn(t.shape, generator=generator) for t in example) for _ in range(count - 1)
    ]
    return [example, *extra]


def lower_with(entry: BaseEntry, model: MultiMethod) -> bytes:
    """The ``.pte`` of ``model`` (single method ``forward``) lowered through ``entry``."""
    (method,) = model.programs
    program = model.programs[method]
    options = LOWERING_OPTIONS.get(entry.name)
    recipe = _recipe_of(entry)
    if recipe is not None:
        program = recipe.quantize(program, calibration_set(model.inputs[method]))
    if entry.backend_id == EthosUEntry.backend_id:
        # Arm's partitioner keeps its operators whole through to_edge_transform_and_lower
        # only; plain to_edge decomposes linear into a float weight permute it cannot take.
        partitioner = entry.partitioner() if isinstance(entry, PartitionerEntry) else None
        partitioner = partitioner or EthosUEntry().partitioner()
        edge = to_edge_transform_and_lower({method: program}, partitioner=[partitioner])
        return bytes(edge.to_executorch().buffer)
    edge = to_edge({method: program})
    if isinstance(entry, PartitionerEntry):
        edge = edge.to_backend(entry.partitioner(options))
    elif isinstance(entry, QuantizerEntryBase):
        edge = edge.to_backend(XnnpackEntry().partitioner())
    elif isinstance(entry, DelegateEntryBase):
        spec = entry.delegation_spec(options)
        lowered = to_backend(spec.backend_id, edge.exported_program(method), spec.compile_specs)
        return bytes(lowered.buffer())
    else:
        assert entry.kind == EntryKind.PORTABLE
    return bytes(edge.to_executorch().buffer)


def _recipe_of(entry: BaseEntry) -> QuantizerEntryBase | None:
    """The recipe ``entry`` lowers: itself, the one a partitioner requires, else none."""
    if isinstance(entry, QuantizerEntryBase):
        return entry
    if isinstance(entry, PartitionerEntry) and entry.required_recipe is not None:
        return default_catalog().get_quantizer(entry.required_recipe)
    return None


def lower_with_partitioner(partitioner: Partitioner, model: MultiMethod) -> bytes:
    """The ``.pte`` of every method of ``model`` lowered with one partitioner."""
    return bytes(to_edge(model.programs).to_backend(partitioner).to_executorch().buffer)


def run_pte(pte: bytes, method: str, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Execute ``method`` of ``pte`` in ExecuTorch's native runtime."""
    loaded = Runtime.get().load_program(pte).load_method(method)
    assert loaded is not None, f"method {method!r} missing from the program"
    return list(loaded.execute(list(inputs)))


def delegated_backends(pte: bytes) -> list[str]:
    """Backend ids of every delegate call in the serialised program, in plan order."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(pte).program
    return [delegate.id for plan in program.execution_plan for delegate in plan.delegates]


def assert_int8_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Loose but meaningful: small relative error, high correlation, and not bit-exact fp32."""
    relative = (actual - expected).norm() / expected.norm()
    correlation = torch.corrcoef(torch.stack([actual.flatten(), expected.flatten()]))[0, 1]
    assert relative < 0.05, f"relative error {relative:.4f}"
    assert correlation > 0.995, f"correlation {correlation:.5f}"
    assert not torch.equal(actual, expected), "int8 output is bit-identical to fp32"
