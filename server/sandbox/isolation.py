"""Run a worker module in a disposable, resource-limited child process; JSON is the only reply."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol

from .errors import IsolatedLoadError
from .limits import ProcessLimits

_LAUNCHER = Path(__file__).with_name("launch.py")
_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH")
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE}
_STDERR_TAIL = 2000


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: no server secrets, forced weights-only torch.load."""
    env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    env.update(
        TORCH_FORCE_WEIGHTS_ONLY_LOAD="1",
        MALLOC_ARENA_MAX="2",
        OMP_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(extra or {})
    return env


def run_isolated(
    module: str,
    args: list[str],
    limits: ProcessLimits,
    *,
    extra_env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> dict[str, Any]:
    """Run ``python -m module args`` under ``limits`` and return the JSON object it printed.

    Raises ``IsolatedLoadError`` when the child times out, is killed by a signal (crash, CPU or
    memory limit), exits without a result, or reports a rejection of its own.
    """
    cmd = [
        sys.executable,
        "-P",
        str(_LAUNCHER),
        str(limits.memory_bytes),
        str(limits.cpu_seconds),
        module,
        *args,
    ]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=worker_env(extra_env),
        cwd=cwd,
        start_new_session=True,  # so a timeout can kill the whole group
    )
    try:
        out, err = proc.communicate(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise IsolatedLoadError(
            "worker_timeout", f"the loader did not finish within {limits.wall_seconds:g} s"
        ) from None
    except BaseException:
        _kill_group(proc)
        raise
    return _interpret(proc.returncode, out[: limits.max_output_bytes], err)


class Isolation(Protocol):
    """Where sandbox jobs run: each in a fresh, disposable, resource-limited process."""

    def run(self, module: str, args: list[str], limits: ProcessLimits) -> dict[str, Any]:
        """Run ``module``'s ``JOB`` on ``args`` under ``limits``; its result, or raise
        ``IsolatedLoadError``."""
        ...


class SubprocessIsolation:
    """Each job in a new interpreter (``python -m``): seconds of imports per job, but needs
    nothing running. Used where no fork server is up (the CLI, tests)."""

    def run(self, module: str, args: list[str], limits: ProcessLimits) -> dict[str, Any]:
        return run_isolated(module, args, limits)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker and anything it spawned; only while it is unreaped, so the group id
    cannot have been reused by an unrelated process."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _interpret(returncode: int, out: bytes, err: bytes) -> dict[str, Any]:
    return interpret_reply(returncode, _last_json_line(out), err)


def interpret_reply(returncode: int, reply: dict[str, Any] | None, stderr: bytes) -> dict[str, Any]:
    """The job's result from a finished child, or the ``IsolatedLoadError`` that says why not.

    ``returncode`` is negative when a signal killed the child; ``reply`` is what it answered
    (None if nothing parseable); the tail of its ``stderr`` explains a silent failure.
    """
    stderr_tail = stderr[-_STDERR_TAIL:].decode("utf-8", "replace")
    if returncode < 0:
        raise IsolatedLoadError(*_signal_reason(-returncode))
    if reply is None:
        if "MemoryError" in stderr_tail or "std::bad_alloc" in stderr_tail:
            raise IsolatedLoadError("worker_out_of_memory", "the loader ran out of memory")
        raise IsolatedLoadError(
            "worker_failed", f"the loader exited with {returncode}: {stderr_tail}"
        )
    if not reply.get("ok"):
        raise IsolatedLoadError(
            str(reply.get("reason", "worker_failed")), str(reply.get("message", ""))
        )
    result: dict[str, Any] = reply["result"]
    return result


def _signal_reason(signum: int) -> tuple[str, str]:
    name = (
        signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
    )
    if signum == signal.SIGXCPU:
        return "worker_cpu_limit", "the loader exceeded its CPU time limit"
    if signum == signal.SIGKILL:
        return "worker_killed", "the loader was killed (memory or CPU limit)"
    if signum in _CRASH_SIGNALS:
        return "worker_crashed", f"the loader crashed with {name}"
    return "worker_killed", f"the loader was killed by {name}"


def _last_json_line(out: bytes) -> dict[str, Any] | None:
    lines = out.strip().splitlines()
    if not lines:
        return None
    try:
        reply = json.loads(lines[-1])
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None
