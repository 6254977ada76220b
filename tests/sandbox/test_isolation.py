"""The disposable worker boundary: limits, crashes and timeouts become clean rejections."""

from __future__ import annotations

from pathlib import Path

import pytest

from pteforge.children.limits import child_env
from pteforge.server.sandbox import (
    IsolatedLoadError,
    Isolation,
    ProcessLimits,
    ProgramDescription,
    SubprocessIsolation,
    load_programs_isolated,
)
from pteforge.server.sandbox.isolation import read_result, run_isolated

from .conftest import ValidArchives
from .misbehaving_worker import Answer

REPO_ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


class _Runner:
    """Runs the misbehaving worker under each isolation kind."""

    def __init__(self, isolation: Isolation) -> None:
        self.isolation = isolation

    def __call__(self, mode: str, limits: ProcessLimits) -> dict[str, object]:
        module = "tests.sandbox.misbehaving_worker"
        if isinstance(self.isolation, SubprocessIsolation):
            # a fresh interpreter must be told where the tests package is
            return run_isolated(
                module, [mode], limits, extra_env={"PYTHONPATH": str(REPO_ROOT)}, cwd=REPO_ROOT
            )
        return self.isolation.run(module, [mode], limits)


@pytest.fixture
def _run(isolation: Isolation) -> _Runner:
    return _Runner(isolation)


def test_well_behaved_worker_reply_survives_stdout_noise(_run: _Runner) -> None:
    assert _run("chatty", ProcessLimits()) == {"fine": True}


def test_the_parent_validates_the_typed_result(_run: _Runner) -> None:
    """The child dumps a typed result; the parent reads it back as that type, and a result
    of another shape (here an ``Answer`` read as a ``ProgramDescription``) is a failed
    loader, never a half-read dict."""
    answer = _run("chatty", ProcessLimits())
    assert read_result(Answer, answer) == Answer(fine=True)
    with pytest.raises(IsolatedLoadError) as info:
        read_result(ProgramDescription, answer)
    assert info.value.reason == "worker_failed"
    assert "unexpected result" in info.value.message
    assert "fine" in info.value.message


# worker mode -> (its limits, the reasons it may be reported with, a fragment of the message)
FAILURES = {
    "hog": (ProcessLimits(memory_bytes=512 * MIB), ("worker_out_of_memory",), ""),
    "segfault": (ProcessLimits(), ("worker_crashed",), "SIGSEGV"),
    "hang": (ProcessLimits(wall_seconds=2), ("worker_timeout",), ""),
    "spin": (
        ProcessLimits(cpu_seconds=1, wall_seconds=60),
        ("worker_cpu_limit", "worker_killed"),
        "",
    ),
    "exit": (ProcessLimits(), ("worker_failed",), ""),
    "nonsense": (ProcessLimits(), ("job_failed",), "unknown mode nonsense"),
}


@pytest.mark.parametrize("mode", FAILURES)
def test_worker_failures_are_reported(_run: _Runner, mode: str) -> None:
    """Out of memory, crashes, wall-clock and CPU limits, exits without a reply and the
    worker's own errors each come back as an ``IsolatedLoadError`` naming what happened."""
    limits, reasons, fragment = FAILURES[mode]
    with pytest.raises(IsolatedLoadError) as info:
        _run(mode, limits)
    assert info.value.reason in reasons
    assert fragment in info.value.message


def test_real_loader_under_a_tiny_memory_limit(valid_archives: ValidArchives) -> None:
    """A fresh interpreter cannot even import torch in 200 MiB. (A forked child inherits
    torch already mapped and only its new allocations hit the cap: see the ``hog`` test.)"""
    with pytest.raises(IsolatedLoadError) as info:
        limits = ProcessLimits(memory_bytes=200 * MIB)
        load_programs_isolated(valid_archives.single, limits, isolation=SubprocessIsolation())
    assert info.value.reason.startswith("worker_")


def test_worker_env_forces_weights_only_and_drops_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTEFORGE_DATABASE_URL", "postgresql://secret")
    env = child_env()
    assert env["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] == "1"
    assert "PTEFORGE_DATABASE_URL" not in env


def test_the_worker_runs_with_the_minimal_environment(
    _run: _Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the server's environment holds (here a database URL) never reaches a loader."""
    monkeypatch.setenv("PTEFORGE_DATABASE_URL", "postgresql://user:secret@db/pteforge")
    env = _run("env", ProcessLimits())["env"]
    assert isinstance(env, dict)
    assert env["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] == "1"
    assert not [name for name in env if name.startswith("PTEFORGE_")]
