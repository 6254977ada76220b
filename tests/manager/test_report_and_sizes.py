"""Constants shared by methods are stored once, and ``report()`` says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from torch import nn
from torch.export import Dim, export

from pteforge.backends import default_catalog
from pteforge.manager import DelegationSpec, ProgramManager, compile_programs
from pteforge.runtime.state import read_program_state
from tests.manager.helpers import assert_runs_like_eager, parameter_bytes
from tests.models import MultiMethod

PLANS = {
    "portable": None,
    "xnnpack_partitioner": XnnpackPartitioner,
    "xnnpack_whole_graph": lambda: DelegationSpec("XnnpackBackend", []),
}


@pytest.fixture(scope="module")
def lowered(shared_edge: ProgramManager) -> dict[str, ProgramManager]:
    return {
        name: shared_edge if make is None else shared_edge.to_backend(make())
        for name, make in PLANS.items()
    }


@pytest.fixture(scope="module")
def ptes(lowered: dict[str, ProgramManager]) -> dict[str, bytes]:
    return {name: manager.to_executorch().buffer for name, manager in lowered.items()}


def _expected_bytes(model: MultiMethod) -> tuple[int, int, int]:
    """(constant bytes over methods, unique bytes, shared bytes) from the eager model."""
    eager = model.eager["encode"].model
    shared = parameter_bytes(eager.shared)
    unique = parameter_bytes(eager)
    return shared + unique, unique, shared


@pytest.mark.parametrize("plan", list(PLANS))
def test_pte_stores_shared_constants_once(
    plan: str, ptes: dict[str, bytes], shared_linear: MultiMethod
) -> None:
    _, unique, _ = _expected_bytes(shared_linear)
    assert len(ptes[plan]) / unique <= 1.01
    assert_runs_like_eager(ptes[plan], shared_linear)


@pytest.mark.parametrize("plan", list(PLANS))
def test_report_constants_match_the_model(
    plan: str, lowered: dict[str, ProgramManager], shared_linear: MultiMethod
) -> None:
    total, unique, shared = _expected_bytes(shared_linear)
    assert lowered[plan].report()["program"] == {
        "constant_bytes": total,
        "unique_constant_bytes": unique,
        "shared_constant_bytes": shared,
    }


def _operator_count(manager: ProgramManager, method: str) -> int:
    graph = manager.exported_program(method).graph
    return sum(1 for node in graph.nodes if node.op == "call_function")


def test_report_operator_counts(
    lowered: dict[str, ProgramManager], shared_edge: ProgramManager
) -> None:
    for method in shared_edge.methods:
        operators = _operator_count(shared_edge, method)
        portable = lowered["portable"].report()["methods"][method]
        assert portable["non_delegated_operators"] == operators
        assert portable["delegated_operators"] == 0 and portable["backends"] == {}
        whole = lowered["xnnpack_whole_graph"].report()["methods"][method]
        assert whole["backends"] == {
            "XnnpackBackend": {"delegated_operators": operators, "delegated_subgraphs": 1}
        }
        # what is left outside is the getitem unpacking the delegate's result
        assert whole["non_delegated_operators"] == 1
        assert whole["operators"]["getitem"] == {"delegated": 0, "non_delegated": 1}


def test_report_is_json_serialisable(lowered: dict[str, ProgramManager]) -> None:
    import json

    for manager in lowered.values():
        assert json.loads(json.dumps(manager.report())) == manager.report()


class _Scores(nn.Module):
    """An attention-score shape: its activations grow with the square of the length."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x @ x.transpose(1, 2), dim=-1)


def test_the_report_says_what_each_method_plans_for_its_dynamic_max(tmp_path: Path) -> None:
    """``planned_memory_bytes`` is the memory plan of the method, planned for a ``Dim``'s
    max (a /v2 session holds it), and the bytes the runtime reads from the ``.pte``."""
    planned = {}
    for top in (16, 64):
        x = torch.randn(1, 8, 4)
        program = export(_Scores(), (x,), dynamic_shapes=({1: Dim("seq", max=top)},))
        compiled = compile_programs({"forward": program}, None, default_catalog())
        planned[top] = compiled.report["methods"]["forward"]["planned_memory_bytes"]
        compiled.write(tmp_path / "scores.pte")
        state = read_program_state(tmp_path / "scores.pte")
        assert state is not None and state.method("forward").planned_bytes == planned[top]
    assert planned[64] > 8 * planned[16] > 0  # 64 x 64 scores against 16 x 16
