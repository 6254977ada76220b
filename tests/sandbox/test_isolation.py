"""The disposable worker boundary: limits, crashes and timeouts become clean rejections."""

from __future__ import annotations

from pathlib import Path

import pytest

from pteforge.server.sandbox import IsolatedLoadError, ProcessLimits, load_programs_isolated
from pteforge.server.sandbox.isolation import run_isolated, worker_env

from .conftest import ValidArchives

REPO_ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def _run(mode: str, limits: ProcessLimits) -> dict[str, object]:
    return run_isolated(
        "tests.sandbox.misbehaving_worker",
        [mode],
        limits,
        extra_env={"PYTHONPATH": str(REPO_ROOT)},
        cwd=REPO_ROOT,
    )


def test_well_behaved_worker_reply_survives_stdout_noise() -> None:
    assert _run("chatty", ProcessLimits()) == {"fine": True}


def test_memory_limit_is_reported() -> None:
    with pytest.raises(IsolatedLoadError) as info:
        _run("hog", ProcessLimits(memory_bytes=512 * MIB))
    assert info.value.reason == "worker_out_of_memory"


def test_crash_is_reported() -> None:
    with pytest.raises(IsolatedLoadError) as info:
        _run("segfault", ProcessLimits())
    assert info.value.reason == "worker_crashed"
    assert "SIGSEGV" in info.value.message


def test_wall_clock_timeout_kills_the_worker() -> None:
    with pytest.raises(IsolatedLoadError) as info:
        _run("hang", ProcessLimits(wall_seconds=2))
    assert info.value.reason == "worker_timeout"


def test_cpu_limit_kills_the_worker() -> None:
    with pytest.raises(IsolatedLoadError) as info:
        _run("spin", ProcessLimits(cpu_seconds=1, wall_seconds=60))
    assert info.value.reason in ("worker_cpu_limit", "worker_killed")


def test_exit_without_reply_is_reported() -> None:
    with pytest.raises(IsolatedLoadError) as info:
        _run("exit", ProcessLimits())
    assert info.value.reason == "worker_failed"


def test_worker_errors_are_translated() -> None:
    with pytest.raises(IsolatedLoadError) as info:
        _run("nonsense", ProcessLimits())
    assert info.value.reason == "job_failed"
    assert "unknown mode nonsense" in info.value.message


def test_real_loader_under_a_tiny_memory_limit(valid_archives: ValidArchives) -> None:
    with pytest.raises(IsolatedLoadError) as info:
        load_programs_isolated(valid_archives.single, ProcessLimits(memory_bytes=200 * MIB))
    assert info.value.reason.startswith("worker_")


def test_worker_env_forces_weights_only_and_drops_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTEFORGE_DATABASE_URL", "postgresql://secret")
    env = worker_env()
    assert env["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] == "1"
    assert "PTEFORGE_DATABASE_URL" not in env
