"""Sandbox jobs in children of a fork server that already imported torch and ExecuTorch.

Starting a fresh interpreter costs about 1.5 s of imports per upload; forking a preloaded
server costs milliseconds. The child is as disposable as a fresh interpreter: before it reads
the upload it starts its own session (so a timeout kills everything it started), replaces
its environment with the minimal one of :func:`pteforge.children.limits.child_env` (no
server secrets, weights-only ``torch.load``; the fork server itself started with it), caps
its address space, CPU time and core dumps (:func:`~pteforge.children.limits.apply_limits`),
sends stdout and stderr to a file in its scratch directory, and confines itself
(:func:`~pteforge.children.confine.confine`: it reads only its upload, writes only that
directory, and has no network). Its one reply is a
:class:`~pteforge.children.reply.ChildReply` over a pipe, never a pickle.
The fork server itself never touches an upload.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import tempfile
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path

from pteforge.children.confine import confine
from pteforge.children.limits import apply_limits, child_env, take_default_signals
from pteforge.children.reply import ChildReply
from pteforge.contracts.json_types import JsonObject

from .isolation import interpret_reply, job_confinement, timeout_error
from .limits import ProcessLimits
from .worker_io import WorkerJob, reply_for

_EXIT_GRACE_SECONDS = 10.0


class ForkServerIsolation:
    """Runs each sandbox job in a new child of ``ctx``'s (preloaded) fork server."""

    def __init__(self, ctx: ForkServerContext) -> None:
        self._ctx = ctx
        self._env = child_env()

    def run(self, module: str, args: list[str], limits: ProcessLimits) -> JsonObject:
        with tempfile.TemporaryDirectory(prefix="pteforge-sandbox-") as scratch:
            log = Path(scratch) / "output.log"
            log.touch()
            receiver, sender = self._ctx.Pipe(duplex=False)
            proc = self._ctx.Process(
                target=forked_main,
                args=(module, args, limits, self._env, str(log), sender),
                name="pteforge-sandbox",
            )
            proc.start()
            sender.close()
            try:
                reply = _await_reply(receiver, proc, limits)
            finally:
                receiver.close()
            _reap(proc)
            stderr = log.read_bytes()
        assert proc.exitcode is not None
        return interpret_reply(proc.exitcode, reply, stderr)


def _await_reply(
    receiver: Connection, proc: BaseProcess, limits: ProcessLimits
) -> ChildReply | None:
    """The child's reply; None if it closed the pipe without one. Kills it on timeout."""
    if not receiver.poll(limits.wall_seconds):
        _kill_group(proc)
        raise timeout_error(limits)
    try:
        data = receiver.recv_bytes(maxlength=limits.max_output_bytes)
    except (EOFError, OSError):  # died, or an oversized reply
        return None
    return ChildReply.from_bytes(data)


def _kill_group(proc: BaseProcess) -> None:
    """Kill the child's session; only while it is unreaped, so the id cannot be reused."""
    if proc.pid is not None and proc.exitcode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _reap(proc: BaseProcess) -> None:
    proc.join(_EXIT_GRACE_SECONDS)
    if proc.exitcode is None:
        _kill_group(proc)
        proc.join()


def forked_main(
    module: str,
    args: list[str],
    limits: ProcessLimits,
    env: dict[str, str],
    log_path: str,
    conn: Connection,
) -> None:
    """The child: contain itself, run ``module``'s ``JOB``, send the reply, exit at once."""
    _contain(limits, env, log_path)
    confine(job_confinement(Path(log_path).parent, args))
    job = importlib.import_module(module).JOB
    assert isinstance(job, WorkerJob), f"{module}.JOB is not a WorkerJob"
    conn.send_bytes(reply_for(job, args).to_bytes())
    conn.close()
    os._exit(0)  # skip interpreter teardown: nothing of this process is needed any more


def _contain(limits: ProcessLimits, env: dict[str, str], log_path: str) -> None:
    os.setsid()
    take_default_signals()
    os.environ.clear()
    os.environ.update(env)
    apply_limits(limits.child)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
