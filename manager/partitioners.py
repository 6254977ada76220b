"""Partitioners the manager hands to upstream ``to_backend``: one per method.

Upstream ``to_backend(MethodProgramsPartitionerSpec)`` takes exactly one partitioner per
method and calls ``preprocess_multimethod`` once per backend id over all of them. Turning
every request (a DelegationSpec, a partitioner, a list of partitioners) into one partitioner
per method is what keeps that guarantee for mixed requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from torch.export import ExportedProgram
from torch.fx.passes.utils.fuser_utils import validate_partition

StageCallback = Callable[[str], None]
OpFilter = Callable[[torch.fx.Node], bool]
_TAG = "delegation_tag"


def operator_name(node: torch.fx.Node) -> str:
    """A readable operator name for ``node`` (``aten.embedding.default``)."""
    target = node.target
    if isinstance(target, str):
        return f"{node.op}:{target}"
    name = getattr(target, "__name__", None) or repr(target)
    return str(name)


class StageTracker:
    """Reports "partition" when the first method starts and "preprocess" after the last."""

    def __init__(self, on_stage: StageCallback | None, methods: Iterable[str]) -> None:
        self._on_stage = on_stage
        self._pending = set(methods)
        self._started = False
        self.programs: dict[str, ExportedProgram] = {}  # method -> program it partitioned

    def started(self, method: str, program: ExportedProgram) -> None:
        self.programs[method] = program
        if not self._started:
            self._started = True
            self._emit("partition")

    def finished(self, method: str) -> None:
        self._pending.discard(method)
        if not self._pending:
            self._emit("preprocess")

    def _emit(self, stage: str) -> None:
        if self._on_stage is not None:
            self._on_stage(stage)


class MethodPartitioner(Partitioner):
    """Runs partitioners in order, each on the nodes the earlier ones left untagged.

    Tags are made unique per inner partitioner and ``partition_tags`` merged. A later
    partition loses the nodes an earlier one claimed; what is left is kept only if it still
    holds an operator and fuses without a dependency cycle, else it is dropped.
    """

    def __init__(
        self,
        method: str,
        partitioners: Sequence[Partitioner],
        tracker: StageTracker | None = None,
    ) -> None:
        super().__init__()
        if not partitioners:
            raise ValueError(f"method {method!r}: at least one partitioner is needed")
        self.method = method
        self.partitioners = list(partitioners)
        self._tracker = tracker

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        if self._tracker is not None:
            self._tracker.started(self.method, exported_program)
        if len(self.partitioners) == 1:
            result = self.partitioners[0].partition(exported_program)
        else:
            result = self._partition_in_order(exported_program)
        if self._tracker is not None:
            self._tracker.finished(self.method)
        return result

    def _partition_in_order(self, program: ExportedProgram) -> PartitionResult:
        merged: dict[str, DelegationSpec] = {}
        for index, partitioner in enumerate(self.partitioners):
            claimed = _take_tags(program)
            result = partitioner.partition(program)
            program = result.tagged_exported_program
            merged.update(_keep_disjoint(program, result.partition_tags, claimed, f"p{index}_"))
            for node, tag in claimed.items():
                node.meta[_TAG] = tag
        return PartitionResult(tagged_exported_program=program, partition_tags=merged)

    def transform_for_pre_decomposition(self, exported_program: ExportedProgram) -> ExportedProgram:
        for partitioner in self.partitioners:
            exported_program = partitioner.transform_for_pre_decomposition(exported_program)
        return exported_program

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], OpFilter | None]:
        if len(self.partitioners) == 1:
            return self.partitioners[0].ops_to_not_decompose(ep)
        ops: list[torch._ops.OpOverload] = []
        checks: list[tuple[set[torch._ops.OpOverload], OpFilter | None]] = []
        for partitioner in self.partitioners:
            own, check = partitioner.ops_to_not_decompose(ep)
            ops.extend(op for op in own if op not in ops)
            checks.append((set(own), check))
        if all(check is None for _, check in checks):
            return ops, None

        def keep(node: torch.fx.Node) -> bool:
            return any(
                node.target in own and (check is None or check(node)) for own, check in checks
            )

        return ops, keep


def _take_tags(program: ExportedProgram) -> dict[torch.fx.Node, str]:
    """Remove and return the delegation tags already on the graph."""
    claimed: dict[torch.fx.Node, str] = {}
    for node in program.graph_module.graph.nodes:
        tag = node.meta.pop(_TAG, None)
        if tag is not None:
            claimed[node] = tag
    return claimed


def _keep_disjoint(
    program: ExportedProgram,
    tags: dict[str, DelegationSpec],
    claimed: dict[torch.fx.Node, str],
    prefix: str,
) -> dict[str, DelegationSpec]:
    """Rename this round's tags with ``prefix``, minus the ``claimed`` nodes."""
    groups: dict[str, list[torch.fx.Node]] = {}
    for node in program.graph_module.graph.nodes:
        tag = node.meta.pop(_TAG, None)
        if tag is not None:
            groups.setdefault(tag, []).append(node)
    kept: dict[str, DelegationSpec] = {}
    for tag, nodes in groups.items():
        left = [n for n in nodes if n not in claimed]
        if tag not in tags or not _fusable(left):
            continue
        for node in left:
            node.meta[_TAG] = prefix + tag
        kept[prefix + tag] = tags[tag]
    return kept


def _fusable(nodes: list[torch.fx.Node]) -> bool:
    """Whether ``nodes`` hold an operator and can be fused without a dependency cycle."""
    if all(n.op == "placeholder" for n in nodes):
        return False
    return bool(validate_partition(nodes))
