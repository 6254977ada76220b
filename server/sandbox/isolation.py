"""Run a worker module in a disposable, resource-limited child process; JSON is the only reply."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Protocol, TypeVar

from pteforge.children.confine import Confinement
from pteforge.children.death import TIMED_OUT, ChildDeath, DeathReason, death_from_exit
from pteforge.children.limits import child_env
from pteforge.children.reply import ChildReply
from pteforge.contracts.json_types import JsonObject
from pteforge.contracts.specs import JsonForm

from .errors import IsolatedLoadError
from .limits import ProcessLimits

_LAUNCHER = Path(__file__).with_name("launch.py")
_STDERR_TAIL = 2000
_R = TypeVar("_R", bound=JsonForm)


def run_isolated(
    module: str,
    args: list[str],
    limits: ProcessLimits,
    *,
    extra_env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> JsonObject:
    """Run ``python -m module args`` under ``limits``, confined
    (:func:`job_confinement`), and return the JSON object it printed.

    Raises ``IsolatedLoadError`` when the child times out, is killed by a signal (crash, CPU or
    memory limit), exits without a result, or reports a rejection of its own.
    """
    with tempfile.TemporaryDirectory(prefix="pteforge-sandbox-") as scratch:
        cmd = [sys.executable, "-P", str(_LAUNCHER), str(limits.memory_bytes)]
        cmd += [str(limits.cpu_seconds), scratch, module, *args]
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(extra_env),
            cwd=cwd or scratch,
            start_new_session=True,  # so a timeout can kill the whole group
        )
        try:
            out, err = proc.communicate(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise timeout_error(limits) from None
        except BaseException:
            _kill_group(proc)
            raise
    return _interpret(proc.returncode, out[: limits.max_output_bytes], err)


def job_confinement(scratch: Path, args: list[str]) -> Confinement:
    """What a sandbox job's child may reach: its ``scratch`` directory, and the files its
    arguments name (the upload it checks), read-only."""
    named = tuple(Path(a) for a in args if os.path.isabs(a) and os.path.exists(a))
    return Confinement(scratch, named)


class Isolation(Protocol):
    """Where sandbox jobs run: each in a fresh, disposable, resource-limited process."""

    def run(self, module: str, args: list[str], limits: ProcessLimits) -> JsonObject:
        """Run ``module``'s ``JOB`` on ``args`` under ``limits``; its result, or raise
        ``IsolatedLoadError``."""
        ...


class SubprocessIsolation:
    """Each job in a new interpreter (``python -m``): seconds of imports per job, but needs
    nothing running. Used where no fork server is up (the CLI, tests)."""

    def run(self, module: str, args: list[str], limits: ProcessLimits) -> JsonObject:
        return run_isolated(module, args, limits)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker and anything it spawned; only while it is unreaped, so the group id
    cannot have been reused by an unrelated process."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _interpret(returncode: int, out: bytes, err: bytes) -> JsonObject:
    return interpret_reply(returncode, ChildReply.from_output(out), err)


def interpret_reply(returncode: int, reply: ChildReply | None, stderr: bytes) -> JsonObject:
    """The job's result from a finished child, or the ``IsolatedLoadError`` that says why not.

    ``returncode`` is negative when a signal killed the child; ``reply`` is what it answered
    (None if nothing parseable); the tail of its ``stderr`` explains a silent failure.
    """
    stderr_tail = stderr[-_STDERR_TAIL:].decode("utf-8", "replace")
    if returncode < 0 or reply is None:
        raise death_error(death_from_exit(returncode, stderr_tail), stderr_tail)
    if not reply.ok or reply.result is None:
        raise IsolatedLoadError(reply.reason or "worker_failed", reply.message)
    return reply.result


def read_result(result_type: type[_R], result: JsonObject) -> _R:
    """A child's ``result`` validated as the ``result_type`` its job builds; a result of any
    other shape is a failed loader (``worker_failed``), like a garbled reply."""
    try:
        return result_type.from_json(result)
    except ValueError as e:  # pydantic.ValidationError
        message = f"the loader answered an unexpected result: {e}"
        raise IsolatedLoadError("worker_failed", message[:_STDERR_TAIL]) from None


def timeout_error(limits: ProcessLimits) -> IsolatedLoadError:
    """The rejection of a loader that ran past ``limits.wall_seconds`` (and was killed)."""
    return death_error(TIMED_OUT, "", limits)


def death_error(
    death: ChildDeath, stderr_tail: str, limits: ProcessLimits | None = None
) -> IsolatedLoadError:
    """A loader's death in the sandbox's words (the ``worker_*`` reasons users see)."""
    name = death.signal_name
    if death.signum == signal.SIGXCPU:
        return IsolatedLoadError("worker_cpu_limit", "the loader exceeded its CPU time limit")
    if death.killed:
        return IsolatedLoadError("worker_killed", "the loader was killed (memory or CPU limit)")
    if death.crashed:
        return IsolatedLoadError("worker_crashed", f"the loader crashed with {name}")
    if death.reason is DeathReason.SIGNAL:
        return IsolatedLoadError("worker_killed", f"the loader was killed by {name}")
    if death.reason is DeathReason.OUT_OF_MEMORY:
        return IsolatedLoadError("worker_out_of_memory", "the loader ran out of memory")
    if death.reason is DeathReason.TIMEOUT:
        seconds = (limits or ProcessLimits()).wall_seconds
        return IsolatedLoadError(
            "worker_timeout", f"the loader did not finish within {seconds:g} s"
        )
    return IsolatedLoadError(
        "worker_failed", f"the loader exited with {death.exit_code}: {stderr_tail}"
    )
