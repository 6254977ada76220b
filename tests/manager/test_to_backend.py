"""``ProgramManager.to_backend``: one preprocess_multimethod per backend id, no mutation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import Partitioner, PartitionResult
from torch.export import ExportedProgram

from pteforge.backends import default_catalog
from pteforge.manager import (
    DelegationSpec,
    LoweringError,
    ProgramManager,
    UnknownBackendIdError,
    UnknownMethodError,
    compile_programs,
    to_edge,
)
from tests.manager.helpers import assert_runs_like_eager
from tests.models import MultiMethod, unsupported_op_programs

Call = dict[str, list[int]]  # method -> number of partitions the backend got


def _make_recording_backend(calls: list[Call]) -> type[BackendDetails]:
    """A backend that records each preprocess_multimethod call on ``calls``."""

    class RecordingBackend(BackendDetails):
        @staticmethod
        def preprocess(
            edge_program: ExportedProgram, compile_specs: list[CompileSpec]
        ) -> PreprocessResult:
            return PreprocessResult(processed_bytes=b"recorded")

        @classmethod
        def preprocess_multimethod(
            cls,
            edge_programs: dict[str, list[ExportedProgram]],
            compile_specs: dict[str, list[list[CompileSpec]]],
        ) -> dict[str, list[PreprocessResult]]:
            calls.append({m: [len(p.graph.nodes) for p in ps] for m, ps in edge_programs.items()})
            return super().preprocess_multimethod(edge_programs, compile_specs)

    return RecordingBackend


class OpPartitioner(Partitioner):
    """Tags every call of the given ops, each as its own partition, for ``backend_id``."""

    def __init__(self, backend_id: str, ops: Callable[[str], bool]) -> None:
        super().__init__()
        self.delegation_spec = DelegationSpec(backend_id, [])
        self.ops = ops

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        tags: dict[str, DelegationSpec] = {}
        for node in exported_program.graph_module.graph.nodes:
            if node.op == "call_function" and self.ops(str(node.target)):
                tag = f"op_{node.name}"
                node.meta["delegation_tag"] = tag
                tags[tag] = self.delegation_spec
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)


@pytest.fixture(scope="module")
def recording() -> Iterator[tuple[str, list[Call]]]:
    calls: list[Call] = []
    backend = _make_recording_backend(calls)
    yield backend.__name__, calls
    del backend


def _activation(target: str) -> bool:
    return "relu" in target or "sigmoid" in target


def _snapshot(manager: ProgramManager) -> dict[str, Any]:
    return {
        m: (str(p.graph), str(p.graph_signature), {k: v.clone() for k, v in p.state_dict.items()})
        for m in manager.methods
        for p in [manager.exported_program(m)]
    }


def _assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert before.keys() == after.keys()
    for method in before:
        assert before[method][:2] == after[method][:2], method
        for name, tensor in before[method][2].items():
            assert torch.equal(tensor, after[method][2][name]), (method, name)


def test_one_preprocess_call_per_backend_for_partitioner_and_delegation_spec(
    shared_edge: ProgramManager, recording: tuple[str, list[Call]]
) -> None:
    backend_id, calls = recording
    calls.clear()
    lowered = shared_edge.to_backend(
        {"encode": OpPartitioner(backend_id, _activation), "decode": DelegationSpec(backend_id, [])}
    )
    assert len(calls) == 1
    assert sorted(calls[0]) == ["decode", "encode"]
    assert len(calls[0]["encode"]) == 1 and len(calls[0]["decode"]) == 1
    report = lowered.report()["methods"]
    assert report["encode"]["backends"][backend_id]["delegated_operators"] == 1  # relu
    assert report["decode"]["backends"][backend_id]["delegated_subgraphs"] == 1


def test_partitioner_lists_and_two_backends_still_one_call_each(
    shared_edge: ProgramManager, recording: tuple[str, list[Call]], shared_linear: MultiMethod
) -> None:
    backend_id, calls = recording
    calls.clear()
    lowered = shared_edge.to_backend(
        {
            "encode": [OpPartitioner(backend_id, _activation), XnnpackPartitioner()],
            "decode": [XnnpackPartitioner(), OpPartitioner(backend_id, _activation)],
        }
    )
    assert len(calls) == 1
    # decode: XNNPACK came first and took the sigmoid too, so only encode reaches us
    assert sorted(calls[0]) == ["encode"]
    report = lowered.report()["methods"]
    assert set(report["encode"]["backends"]) == {backend_id, "XnnpackBackend"}
    assert report["encode"]["backends"][backend_id]["delegated_operators"] == 1
    assert set(report["decode"]["backends"]) == {"XnnpackBackend"}


def test_receiver_unchanged_and_absent_methods_kept(
    shared_edge: ProgramManager, shared_linear: MultiMethod
) -> None:
    before = _snapshot(shared_edge)
    only_encode = shared_edge.to_backend({"encode": DelegationSpec("XnnpackBackend", [])})
    pte = only_encode.to_executorch().buffer
    _assert_same(before, _snapshot(shared_edge))
    assert str(only_encode.exported_program("decode").graph) == before["decode"][0]
    assert only_encode.report()["methods"]["decode"]["backends"] == {}
    # emitting twice from one manager works: emission does not consume the manager
    assert only_encode.to_executorch().buffer == pte
    assert_runs_like_eager(pte, shared_linear)


def test_whole_graph_unsupported_names_method_backend_node_and_operator() -> None:
    model = unsupported_op_programs()
    edge = to_edge({"tokens": model.programs["forward"]})
    with pytest.raises(LoweringError) as raised:
        edge.to_backend({"tokens": DelegationSpec("XnnpackBackend", [])})
    error = raised.value
    assert (error.method, error.backend_id) == ("tokens", "XnnpackBackend")
    assert error.node == "aten_embedding_default"
    assert error.operator is not None and "embedding" in error.operator
    for part in ("tokens", "XnnpackBackend", "aten_embedding_default"):
        assert part in str(error)


def test_unknown_backend_id_lists_registered(shared_edge: ProgramManager) -> None:
    with pytest.raises(UnknownBackendIdError) as raised:
        shared_edge.to_backend({"decode": DelegationSpec("NoSuchBackend", [])})
    assert raised.value.backend_id == "NoSuchBackend"
    assert raised.value.method == "decode"
    assert "XnnpackBackend" in raised.value.known
    assert "XnnpackBackend" in str(raised.value)


def test_unknown_method_in_mapping(shared_edge: ProgramManager) -> None:
    with pytest.raises(UnknownMethodError) as raised:
        shared_edge.to_backend({"encdoe": XnnpackPartitioner()})
    assert raised.value.known == ["decode", "encode"]


def test_partitioner_naming_unregistered_backend_lists_registered(
    shared_edge: ProgramManager,
) -> None:
    with pytest.raises(UnknownBackendIdError) as raised:
        shared_edge.to_backend({"encode": OpPartitioner("NoSuchBackend", _activation)})
    assert raised.value.backend_id == "NoSuchBackend"
    assert "XnnpackBackend" in raised.value.known


def test_to_backend_reports_partition_then_preprocess(shared_edge: ProgramManager) -> None:
    stages: list[str] = []
    shared_edge.to_backend(DelegationSpec("XnnpackBackend", []), on_stage=stages.append)
    assert stages == ["partition", "preprocess"]


class CyclePartitioner(Partitioner):
    """Tags the first and last ``relu`` as one partition around an untagged ``sin``: a cycle."""

    def __init__(self) -> None:
        super().__init__()
        self.delegation_spec = DelegationSpec("XnnpackBackend", [])

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        relus = [n for n in exported_program.graph.nodes if "relu" in str(n.target)]
        for node in (relus[0], relus[-1]):
            node.meta["delegation_tag"] = "cycle"
        return PartitionResult(exported_program, {"cycle": self.delegation_spec})


class ReluSinRelu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.sin(torch.relu(x)))


def test_partitioner_failure_without_a_node_names_method_and_backend() -> None:
    program = torch.export.export(ReluSinRelu(), (torch.randn(4),))
    edge = to_edge({"encode": program, "decode": program})
    with pytest.raises(LoweringError) as raised:
        edge.to_backend({"encode": XnnpackPartitioner(), "decode": CyclePartitioner()})
    error = raised.value
    assert (error.method, error.backend_id) == ("decode", "XnnpackBackend")
    assert "dependency cycles" in str(error) and "'decode'" in str(error)


class PassFailingPartitioner(Partitioner):
    """Runs its graph through upstream's ``PassManager`` with a pass that fails, as
    XNNPACK's partitioner runs ``ChannelsLastTaggedReshapePass``: the manager's exception
    only says which pass failed, the reason is the error it was raised from."""

    def __init__(self) -> None:
        super().__init__()
        self.delegation_spec = DelegationSpec("XnnpackBackend", [])

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        from torch.fx.passes.infra.pass_manager import PassManager

        def channels_last(graph_module: torch.fx.GraphModule) -> None:
            raise RuntimeError("required rank 4 tensor to use channels_last format")

        PassManager([channels_last])(exported_program.graph_module)
        return PartitionResult(exported_program, {})


def test_a_wrapped_upstream_failure_keeps_its_reason() -> None:
    """MobileViT under xnnpack-int8 failed with only "An error occurred when running the
    'ChannelsLastTaggedReshapePass' pass after the following passes: []": the RuntimeError
    that pass raised is part of the message."""
    program = torch.export.export(ReluSinRelu(), (torch.randn(4),))
    with pytest.raises(LoweringError) as raised:
        to_edge({"forward": program}).to_backend({"forward": PassFailingPartitioner()})
    message = str(raised.value)
    assert "'forward'" in message and "XnnpackBackend" in message
    assert "'channels_last' pass" in message
    assert "RuntimeError: required rank 4 tensor to use channels_last format" in message


def test_a_program_that_fails_before_any_backend_is_a_lowering_error() -> None:
    """An operator argument torch itself refuses (a string argument an upload can set to
    anything) fails the whole-graph lowering with the manager's error, naming torch's words,
    not a bare ValueError (which a job would report as an internal error)."""
    from pteforge.backends import default_catalog
    from pteforge.manager import ManagerError, compile_programs

    class Floor(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.div(x, 2.0, rounding_mode="floor")

    program = torch.export.export(Floor(), (torch.ones(2, 3),))
    for node in program.graph.nodes:
        if node.kwargs.get("rounding_mode") == "floor":
            node.kwargs = {"rounding_mode": "floor'); import os; ('"}
    plan = {"all": {"delegate": {"backend_id": "XnnpackBackend"}}}
    with pytest.raises(ManagerError, match="rounding_mode"):
        compile_programs({"forward": program}, plan, default_catalog())


class _InputNamedInput(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.linear(input)  # type: ignore[no-any-return]


def test_an_input_named_like_a_builtin_lowers_and_keeps_its_name() -> None:
    """Lowering works on copies of the caller's programs (4aca4d6); a deep copy of a graph
    renames an input called ``input`` to ``input_1`` but not the signature, and every such
    program failed at loading ("Input spec name input does not match node name input_1")."""
    x = torch.randn(1, 4)
    program = torch.export.export(_InputNamedInput().eval(), (x,))
    plan = {"all": {"partitioners": ["xnnpack"]}}
    compiled = compile_programs({"forward": program}, plan, default_catalog())
    assert [spec.name for spec in compiled.methods["forward"].inputs] == ["input"]
    assert [n.name for n in program.graph.nodes if n.op == "placeholder"][-1] == "input"
