"""first_unsupported_node: the operator a backend would reject, found before lowering."""

from __future__ import annotations

import pytest
import torch
from executorch.exir import to_edge
from executorch.exir.backend.backend_api import to_backend
from executorch.exir.dialects._ops import ops as exir_ops
from torch import nn

from pteforge.backends.support import first_unsupported_node
from tests.models import small_mlp_programs, unsupported_op_programs


def test_finds_the_embedding_xnnpack_rejects() -> None:
    edge = to_edge(unsupported_op_programs().programs).exported_program("forward")
    node = first_unsupported_node("XnnpackBackend", edge)
    assert node is not None
    assert node.target == exir_ops.edge.aten.embedding.default
    assert node.graph is edge.graph  # a node of the caller's program, not of a copy


def test_agrees_with_upstream_whole_graph_lowering() -> None:
    edge = to_edge(unsupported_op_programs().programs).exported_program("forward")
    node = first_unsupported_node("XnnpackBackend", edge)
    assert node is not None
    with pytest.raises(RuntimeError, match=r"aten\.embedding\.default is not supported"):
        to_backend("XnnpackBackend", edge, [])


def test_leaves_the_program_untouched() -> None:
    edge = to_edge(unsupported_op_programs().programs).exported_program("forward")
    before = str(edge.graph)
    first_unsupported_node("XnnpackBackend", edge)
    assert str(edge.graph) == before
    assert all("delegation_tag" not in node.meta for node in edge.graph.nodes)


def test_fully_supported_model_has_none() -> None:
    edge = to_edge(small_mlp_programs().programs).exported_program("forward")
    assert first_unsupported_node("XnnpackBackend", edge) is None


class TwoUnsupported(nn.Module):
    """linear (supported), then cumsum and embedding (both unsupported by XNNPACK)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.embed = nn.Embedding(16, 8)

    def forward(self, x: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(self.proj(x), 1) + self.embed(tokens)


def test_first_in_graph_order() -> None:
    inputs = (torch.randn(1, 8), torch.randint(0, 16, (1, 8)))
    edge = to_edge(torch.export.export(TwoUnsupported(), inputs)).exported_program()
    compute = [n.target for n in edge.graph.nodes if n.op == "call_function"]
    assert compute.index(exir_ops.edge.aten.cumsum.default) < compute.index(
        exir_ops.edge.aten.embedding.default
    )
    node = first_unsupported_node("XnnpackBackend", edge)
    assert node is not None and node.target == exir_ops.edge.aten.cumsum.default


def test_unknown_backend_has_no_answer() -> None:
    edge = to_edge(unsupported_op_programs().programs).exported_program("forward")
    assert first_unsupported_node("NoSuchBackend", edge) is None
