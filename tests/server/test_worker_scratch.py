"""Compile workers' scratch directories: a dead worker's is swept with what its job left, a
live worker's (in another process, or this one) never is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pteforge.server.jobs.scratch import WorkerScratch, sweep

# A worker stand-in: claims a scratch directory, leaves a job's file in it, says where, and
# waits for stdin to close (or a SIGKILL).
_HOLDER = """
import sys
from pathlib import Path
from pteforge.server.jobs.scratch import WorkerScratch
scratch = WorkerScratch.claim(Path(sys.argv[1]))
(scratch.path / "job").mkdir()
(scratch.path / "job" / "program.pt2").write_bytes(b"x" * 4096)
print(scratch.path, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def _hold(root: Path, procs: list[subprocess.Popen[str]]) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    procs.append(proc)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_killed_workers_directory_is_swept_and_live_ones_are_kept(
    tmp_path: Path, holders: list[subprocess.Popen[str]]
) -> None:
    root = tmp_path / "work"
    own = WorkerScratch.claim(root)
    killed, killed_dir = _hold(root, holders)
    _, live_dir = _hold(root, holders)
    assert (killed_dir / "job" / "program.pt2").exists()
    assert sweep(root) == []  # every owner is alive
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    left_by_dead_pid = root / "worker-999999-old"  # e.g. before a reboot: no lock held
    (left_by_dead_pid / "tmpjob").mkdir(parents=True)
    assert sorted(sweep(root)) == sorted([killed_dir, left_by_dead_pid])
    assert sorted(root.iterdir()) == sorted([own.path, live_dir])
    assert (live_dir / "job" / "program.pt2").exists()
    own.close()


def test_a_stopping_worker_removes_its_own_directory(tmp_path: Path) -> None:
    scratch = WorkerScratch.claim(tmp_path / "work")
    (scratch.path / "out.pte").write_bytes(b"partial")
    assert sweep(tmp_path / "work") == []  # locked by this process: not swept
    scratch.close()
    assert not scratch.path.exists()
    assert list((tmp_path / "work").iterdir()) == []


def test_a_sweep_of_a_missing_root_removes_nothing(tmp_path: Path) -> None:
    assert sweep(tmp_path / "absent") == []
