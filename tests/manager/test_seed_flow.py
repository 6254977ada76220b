# ruff: noqa: E501  (the seed flow is kept verbatim, long lines included)
"""The seed flow (to_backend with a partitioner and a DelegationSpec), verbatim but for the import line."""

from __future__ import annotations

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

from tests.manager.helpers import assert_runs_like_eager
from tests.models import MultiMethod


def test_seed_flow_runs_verbatim(shared_linear: MultiMethod) -> None:
    encode_ep = shared_linear.programs["encode"]
    decode_ep = shared_linear.programs["decode"]

    from pteforge.manager import CompileSpec, DelegationSpec, to_edge

    # fmt: off
    edge_manager = to_edge({"encode": encode_ep, "decode": decode_ep})  # torch.export ExportedPrograms
    lowered = edge_manager.to_backend(DelegationSpec("XnnpackBackend", []))  # whole graph, every method
    lowered = edge_manager.to_backend({"encode": DelegationSpec("XnnpackBackend", [])})  # only encode
    lowered = edge_manager.to_backend({"encode": XnnpackPartitioner(),       # mix per method
                                       "decode": DelegationSpec("XnnpackBackend", [])})
    pte_bytes = lowered.to_executorch().buffer
    # fmt: on

    assert CompileSpec("k", b"v").value == b"v"
    report = lowered.report()["methods"]
    assert report["encode"]["backends"]["XnnpackBackend"]["delegated_operators"] > 0
    assert report["decode"]["non_delegated_operators"] == 1  # only the delegate's getitem
    assert_runs_like_eager(pte_bytes, shared_linear)
