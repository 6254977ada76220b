"""Local artifact copies: written once, bounded by bytes, recently used ones never deleted."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pteforge.runtime import RuntimePool
from pteforge.runtime.artifact_files import (
    ArtifactFiles,
    WithData,
    program_identity,
    verified_path,
)
from pteforge.runtime.errors import ArtifactIntegrityError
from tests.runtime.helpers import Compiled


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _writer(size: int, calls: list[Path] | None = None) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        if calls is not None:
            calls.append(path)
        path.write_bytes(b"x" * size)

    return write


def test_least_recently_used_copies_go_once_over_capacity(tmp_path: Path) -> None:
    clock = Clock()
    files = ArtifactFiles(tmp_path, capacity_bytes=250, grace_s=10, clock=clock)
    for name in ("a", "b", "c"):
        files.ensure(name, _writer(100))
        clock.now += 60
    # a is oldest: writing c took the total to 300 > 250 and a was idle for over 10 s
    assert not files.path("a").exists()
    assert files.path("b").exists() and files.path("c").exists()
    assert files.total_bytes == 200
    assert files.touch("b")  # b is now the most recently used
    clock.now += 60
    files.ensure("d", _writer(100))
    assert not files.path("c").exists()
    assert {p.stem for p in tmp_path.glob("*.pte")} == {"b", "d"}


def test_copies_used_within_the_grace_period_are_kept_over_capacity(tmp_path: Path) -> None:
    clock = Clock()
    files = ArtifactFiles(tmp_path, capacity_bytes=150, grace_s=10, clock=clock)
    files.ensure("a", _writer(100))
    clock.now += 5
    files.ensure("b", _writer(100))  # a may be about to be opened by a worker: kept
    assert files.path("a").exists() and files.path("b").exists()
    clock.now += 20
    files.ensure("b", _writer(100))
    assert not files.path("a").exists()


def test_written_once_and_rewritten_after_drop(tmp_path: Path) -> None:
    calls: list[Path] = []
    files = ArtifactFiles(tmp_path, capacity_bytes=None)
    for _ in range(3):
        assert files.ensure("a", _writer(10, calls)).read_bytes() == b"x" * 10
    assert len(calls) == 1
    files.drop("a")
    assert not files.touch("a")
    files.ensure("a", _writer(10, calls))
    assert len(calls) == 2
    assert not list(tmp_path.glob("*.part"))


def test_copies_from_an_earlier_run_are_adopted_oldest_first(tmp_path: Path) -> None:
    (tmp_path / "old.pte").write_bytes(b"x" * 100)
    clock = Clock()
    files = ArtifactFiles(tmp_path, capacity_bytes=150, grace_s=10, clock=clock)
    assert files.total_bytes == 100
    files.ensure("new", _writer(100))
    assert not (tmp_path / "old.pte").exists()


def test_the_pool_refetches_an_evicted_copy(artifacts: dict[str, Compiled], tmp_path: Path) -> None:
    """A bounded pool keeps working when a copy it wrote is gone (evicted or dropped), on
    both the blocking and the asyncio path."""
    compiled = artifacts["mlp"]
    inputs = [t.numpy() for t in compiled.model.inputs["forward"]]
    calls: list[Path] = []

    def materialize(dest: Path) -> None:
        calls.append(dest)
        dest.write_bytes(compiled.path.read_bytes())

    with RuntimePool(1, 1 << 20, tmp_path, disk_cache_bytes=1) as pool:
        first = pool.infer(compiled.sha256, "forward", inputs, materialize)
        pool.files.path(compiled.sha256).unlink()
        again = pool.infer(compiled.sha256, "forward", inputs, materialize)
        pool.files.path(compiled.sha256).unlink()
        result = asyncio.run(pool.infer_async(compiled.sha256, "forward", inputs, materialize))
    assert len(calls) == 3
    for outcome in (again, result):
        np.testing.assert_array_equal(outcome.outputs[0], first.outputs[0])


def test_a_pte_and_its_ptd_are_one_copy_checked_as_a_pair(tmp_path: Path) -> None:
    """The .ptd is written beside the .pte under the pair's identity, counted with it,
    evicted with it, and verified with it: the same .pte with another .ptd is another
    identity, and a swapped .ptd fails the check."""
    clock = Clock()
    files = ArtifactFiles(tmp_path / "copies", capacity_bytes=250, grace_s=10, clock=clock)
    pte, ptds = tmp_path / "m.pte", [tmp_path / "a.ptd", tmp_path / "b.ptd"]
    pte.write_bytes(b"p" * 50)
    ptds[0].write_bytes(b"a" * 100)
    ptds[1].write_bytes(b"b" * 100)
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (pte, *ptds)]
    first, second = (program_identity(digest[0], d) for d in digest[1:])
    assert program_identity(digest[0], None) == digest[0] and first != second
    copy = files.local(first, WithData(pte, ptds[0]))
    assert copy.with_suffix(".ptd").read_bytes() == ptds[0].read_bytes()
    assert files.total_bytes == 150 and verified_path(first, str(copy)) == copy
    with pytest.raises(ArtifactIntegrityError):
        verified_path(second, str(copy))
    clock.now += 100
    files.local(second, WithData(pte, ptds[1]))  # 300 bytes: the first pair goes, whole
    assert not copy.exists() and not copy.with_suffix(".ptd").exists()
    assert files.total_bytes == 150
