"""Hostile indices through upstream's quantized embedding kernels, in a confined worker.

Upstream's ``embedding_byte`` aborts on an index outside the weight (killing the worker and
whatever it held); ``embedding_4bit`` and ``embedding_2bit`` do not check: an index past
the weight answers the bytes found there (an out-of-bounds read that the output returns) or
is a segmentation fault. So a method whose input reaches such a kernel's indices refuses
values outside ``[0, rows)`` before it runs (``runtime/kernel_guards.py``), and the worker
goes on answering eager PyTorch's numbers.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from pteforge.runtime import InvalidInputError, ProgramLoadError, RuntimePool
from pteforge.runtime.kernel_guards import check_value_bounds, kernel_guards
from tests.runtime import embedding_program as emb

KINDS = {
    "byte": (8, "direct"), "4bit": (4, "direct"), "2bit": (2, "direct"),
    "4bit_viewed": (4, "view"), "2bit_cast": (2, "cast"),
}  # fmt: skip
HOSTILE = [emb.ROWS, emb.ROWS + 1, -1, 10**6, -(10**6), 10**11, 2**63 - 1, -(2**63)]


class Program:
    """A built program: its model (for eager numbers), path and digest."""

    def __init__(self, bits: int, route: str, path: Path) -> None:
        self.model = emb.QuantizedEmbedding(bits, route)
        self.path = emb.build(self.model, path)
        self.sha256 = hashlib.sha256(self.path.read_bytes()).hexdigest()

    def infer(self, pool: RuntimePool, indices: torch.Tensor) -> np.ndarray:
        result = pool.infer(self.sha256, "forward", [indices.numpy()], self.path)
        return result.outputs[0]

    def assert_eager(self, pool: RuntimePool) -> None:
        expected = self.model(emb.INDICES).numpy()
        np.testing.assert_allclose(self.infer(pool, emb.INDICES), expected, rtol=1e-6)


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Program]:
    root = tmp_path_factory.mktemp("embeddings")
    return {kind: Program(*KINDS[kind], root / f"{kind}.pte") for kind in KINDS}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_rows_are_read_from_the_program(kind: str, programs: dict[str, Program]) -> None:
    assert kernel_guards(programs[kind].path).rows == {"forward": {"input_0": emb.ROWS}}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_valid_indices_answer_eager_pytorch(
    kind: str, pool: RuntimePool, programs: dict[str, Program]
) -> None:
    programs[kind].assert_eager(pool)


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_index_outside_the_weight_is_refused_before_it_runs(
    kind: str, value: int, pool: RuntimePool, programs: dict[str, Program]
) -> None:
    program = programs[kind]
    hostile = torch.tensor([[0, value, 1]])
    expected = f"input 'input_0': value {value} out of range [0, {emb.ROWS})"
    with pytest.raises(InvalidInputError, match=rf"^{re.escape(expected)}"):
        program.infer(pool, hostile)
    program.assert_eager(pool)


@pytest.mark.parametrize("bits", [4, 2])
def test_a_method_whose_indices_no_input_check_bounds_is_refused(
    bits: int, pool: RuntimePool, tmp_path: Path
) -> None:
    """Indices the method computes reach the unchecked kernels whatever the caller sends (a
    hand-made program computes any index it likes): such a method does not run at all."""
    program = Program(bits, "computed", tmp_path / "computed.pte")
    refused = kernel_guards(program.path).refused["forward"]
    assert f"embedding_{bits}bit, whose kernel does not check its indices" in refused
    with pytest.raises(ProgramLoadError, match="computed by the method, not taken from an input"):
        program.infer(pool, emb.INDICES)


def test_the_byte_kernel_checks_computed_indices_itself(tmp_path: Path) -> None:
    """It aborts the worker on a bad index (the pool survives that): not refused."""
    model = emb.QuantizedEmbedding(8, "computed")
    assert kernel_guards(emb.build(model, tmp_path / "byte.pte")).refused == {}


def test_an_unreadable_program_table_runs_no_method(tmp_path: Path) -> None:
    path = tmp_path / "garbage.pte"
    path.write_bytes(b"\x00" * 64)
    assert kernel_guards(path).refused == {"*": "its program table cannot be read"}


def test_a_generation_checks_its_value_bounds_once(programs: dict[str, Program]) -> None:
    """A generation feeds token ids below the vocabulary and positions below the context,
    unchecked per token: a vocabulary past the embedding's rows is refused up front."""
    guards = kernel_guards(programs["4bit"].path)
    check_value_bounds(guards, "forward", {"input_0": emb.ROWS, "input_1": 10**6})
    with pytest.raises(ProgramLoadError, match=f"values up to {emb.ROWS} .* of {emb.ROWS} rows"):
        check_value_bounds(guards, "forward", {"input_0": emb.ROWS + 1})
