"""A weight read by a delegate and by a portable kernel is stored once in the ``.pte``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
from executorch.exir._serialize._program import _get_extended_header, deserialize_pte_binary
from executorch.exir.schema import Program
from executorch.runtime import Runtime, Verification
from torch import nn

from pteforge.manager import ProgramManager, to_edge
from pteforge.manager.constant_sharing import share_constants
from pteforge.manager.report import pte_layout
from tests.manager.helpers import assert_runs_like_eager, parameter_bytes
from tests.models import MultiMethod, export_methods


class TiedLM(nn.Module):
    """GPT-2's tying: ``lm_head`` reads the embedding's weight (embedding stays portable)."""

    def __init__(self, vocab: int = 512, dim: int = 256) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.ln = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.ln(self.wte(ids)))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def tied() -> MultiMethod:
    torch.manual_seed(0)
    return export_methods(TiedLM(), {"forward": (torch.randint(0, 512, (1, 8)),)})


@pytest.fixture(scope="module")
def tied_xnnpack(tied: MultiMethod) -> ProgramManager:
    return to_edge(tied.programs).to_backend(XnnpackPartitioner())


@pytest.fixture(scope="module")
def mixed(shared_edge: ProgramManager) -> ProgramManager:
    """``encode`` delegated to XNNPACK, ``decode`` portable; both read ``shared``."""
    return shared_edge.to_backend({"encode": XnnpackPartitioner()})


def _unique_bytes(manager: ProgramManager) -> int:
    unique: int = manager.report()["program"]["unique_constant_bytes"]
    return unique


def _program(pte: bytes) -> Program:
    header = _get_extended_header(pte)
    assert header is not None
    return _flatbuffer_to_program(pte[: header.program_size])


def test_tied_embedding_is_stored_once(tied_xnnpack: ProgramManager, tied: MultiMethod) -> None:
    pte = tied_xnnpack.to_executorch().buffer
    assert _unique_bytes(tied_xnnpack) == parameter_bytes(tied.eager["forward"])
    assert len(pte) / _unique_bytes(tied_xnnpack) <= 1.01
    assert_runs_like_eager(pte, tied, atol=1e-4, rtol=1e-5)


def test_weight_of_a_delegated_and_a_portable_method_is_stored_once(
    mixed: ProgramManager, shared_linear: MultiMethod
) -> None:
    report = mixed.report()["methods"]
    assert report["encode"]["backends"] and not report["decode"]["backends"]
    pte = mixed.to_executorch().buffer
    assert len(pte) / _unique_bytes(mixed) <= 1.01
    assert_runs_like_eager(pte, shared_linear)


def test_upstream_layout_stores_it_twice(tied_xnnpack: ProgramManager) -> None:
    """What ``share_constants=False`` (upstream serialisation) costs: the weight again."""
    weight = 512 * 256 * 4
    upstream = tied_xnnpack.to_executorch(share_constants=False).buffer
    shared = tied_xnnpack.to_executorch().buffer
    assert len(upstream) - len(shared) >= weight


@pytest.mark.parametrize("share", [False, True])
def test_pte_layout_counts_each_byte_once(tied_xnnpack: ProgramManager, share: bool) -> None:
    pte = tied_xnnpack.to_executorch(share_constants=share).buffer
    layout = pte_layout(pte)
    parts = {k: v for k, v in layout.items() if k != "pte_bytes"}
    assert layout["pte_bytes"] == len(pte) == sum(parts.values())
    assert min(parts.values()) >= 0 and layout["delegate_bytes"] > 0
    assert layout["constant_bytes"] >= 512 * 256 * 4
    # the XNNPACK copy of the tied weight, gone once it aliases the constant
    assert layout["named_data_bytes"] == (0 if share else 512 * 256 * 4)


def test_named_data_points_into_the_constant_segment(tied_xnnpack: ProgramManager) -> None:
    pte = tied_xnnpack.to_executorch().buffer
    program = _program(pte)
    constants = program.segments[program.constant_segment.segment_index]
    (named,) = program.named_data
    segment = program.segments[named.segment_index]
    assert constants.offset <= segment.offset
    assert segment.offset + segment.size <= constants.offset + constants.size
    # upstream's own reader still restores the named blob and the constants
    restored = deserialize_pte_binary(pte)
    assert restored.named_data is not None and named.key in restored.named_data.pte_data


def test_file_loaded_with_verification_matches_upstream_layout(
    mixed: ProgramManager, shared_linear: MultiMethod, tmp_path: Path
) -> None:
    path = tmp_path / "shared.pte"
    path.write_bytes(mixed.to_executorch().buffer)
    upstream = mixed.to_executorch(share_constants=False).buffer
    runtime = Runtime.get()
    ours = runtime.load_program(path, verification=Verification.InternalConsistency)
    theirs = runtime.load_program(upstream)
    methods = {m: ours.load_method(m) for m in shared_linear.inputs}  # loaded side by side
    for method, inputs in shared_linear.inputs.items():
        got = methods[method].execute(list(inputs))
        expected = theirs.load_method(method).execute(list(inputs))
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True)), method


@pytest.mark.parametrize("delegate_all", [False, True])
def test_nothing_to_share_keeps_upstream_bytes(
    shared_edge: ProgramManager, delegate_all: bool
) -> None:
    manager = shared_edge.to_backend(XnnpackPartitioner()) if delegate_all else shared_edge
    emitted = manager.to_executorch(share_constants=False)
    assert share_constants(emitted) is None
    assert manager.to_executorch().buffer == emitted.buffer


class _EmptyBuffer(nn.Module):
    """A linear XNNPACK takes and a zero-size buffer it leaves to a portable kernel: the
    method's only constant outside its delegate has no bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 4)
        self.register_buffer("empty", torch.zeros(0), persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.linear(x), torch.cat([self.empty, x.flatten()])


def test_constants_without_bytes_load_from_a_file(tmp_path: Path) -> None:
    """Upstream writes a constant segment of 0 bytes, which ExecuTorch's file loaders load as
    no segment: the method then failed with InvalidProgram from a file (GPT-2 under OpenVINO
    in the zoo), and loaded only from memory."""
    torch.manual_seed(0)
    model = export_methods(_EmptyBuffer(), {"forward": (torch.randn(2, 8),)})
    path = tmp_path / "empty.pte"
    path.write_bytes(
        to_edge(model.programs).to_backend(XnnpackPartitioner()).to_executorch().buffer
    )
    (x,) = model.inputs["forward"]
    got = Runtime.get().load_program(path).load_method("forward").execute([x])
    for out, ref in zip(got, model.eager["forward"](x), strict=True):
        torch.testing.assert_close(out, ref)
