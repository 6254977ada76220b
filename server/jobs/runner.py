"""Runs one lowering child for a claimed job and watches it.

A worker keeps one *standby* lowering process (:class:`StandbyLowering`): forked before the
job arrives from a fork server that warmed up once (:mod:`warmup`), so it is ready in
milliseconds, it lowers exactly one job and exits; the worker then starts the next standby.
The worker thread that calls :func:`run_lowering` heartbeats the job's lease every tick (or at
once when interrupted: a cancel notification), forwards stage messages to storage, and kills
the child on cancel, lease loss, timeout or worker shutdown. A child that dies without a
result (crash, SIGKILL by the kernel's OOM killer, RLIMIT_AS) becomes a clear
``compile_crashed`` outcome of this job only, which the job runner retries at once while the
job has attempts left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path

from pteforge.children.death import DeathReason, death_from_exit
from pteforge.children.forkserver import LOWERING_PRELOAD, start_fork_server
from pteforge.contracts.errors import ErrorCode
from pteforge.contracts.jobs import (
    ChildMessage,
    ChildRequest,
    ErrorMessage,
    ProfileMessage,
    ResultMessage,
)
from pteforge.server.jobs.lowering_child import standby_main
from pteforge.server.jobs.pipe import LoweringOutcome, recv_child_message, send_message
from pteforge.server.jobs.warmup import FORK_SERVER_WARM_UP

_EXIT_GRACE_SECONDS = 10.0


class Verdict:
    """What the watch loop decided from one heartbeat."""

    CONTINUE = "continue"
    CANCEL = "cancel"
    ABANDON = "abandon"  # lease lost or worker stopping: someone else owns the job now


@dataclass
class Watch:
    """Callbacks and limits of one lowering run."""

    tick_seconds: float
    timeout_seconds: float
    heartbeat: Callable[[], str]  # returns a Verdict
    on_stage: Callable[[str], None]
    # Set from another thread (a cancel notification, the worker stopping): the loop
    # heartbeats now instead of at its next tick, so a cancel kills the child at once.
    interrupt: threading.Event | None = None

    def wait_slice(self) -> float:
        """How long to wait for the child's next message before looking again."""
        return self.tick_seconds if self.interrupt is None else min(self.tick_seconds, 0.05)

    def interrupted(self) -> bool:
        """Whether an interrupt came since the last call (and clear it)."""
        if self.interrupt is None or not self.interrupt.is_set():
            return False
        self.interrupt.clear()
        return True


def lowering_context(warm_up: bool = False) -> ForkServerContext:
    """The worker's fork server, started now (with a clean environment) so the first job
    does not pay for imports; with ``warm_up`` it also lowers a tiny program once before it
    forks its first child, so every lowering process starts warm. Lowering keeps torch's own
    thread count. (A process has one fork server: only its first start chooses.)"""
    warm = (FORK_SERVER_WARM_UP,) if warm_up else ()
    return start_fork_server(LOWERING_PRELOAD, warm, single_threaded=False)


@dataclass
class StandbyLowering:
    """A lowering process started ahead of its job, and the worker's end of its pipe."""

    process: BaseProcess
    conn: Connection

    @classmethod
    def start(cls, ctx: ForkServerContext, warm_up: bool, scratch: Path) -> StandbyLowering:
        """Fork a standby now; it confines itself to ``scratch`` (where its job's program
        and output will be), warms up itself if asked (for a fork server that did not) and
        then waits for its one job."""
        conn, child_end = ctx.Pipe(duplex=True)
        proc = ctx.Process(
            target=standby_main, args=(child_end, warm_up, str(scratch)), name="pteforge-lowering"
        )
        proc.start()
        child_end.close()
        return cls(proc, conn)

    def discard(self) -> None:
        """Stop a standby that will get no job (worker stopping)."""
        self.conn.close()
        _reap(self.process, 0.0)


def _died_message(exitcode: int | None) -> str:
    death = death_from_exit(exitcode)
    if death.reason is DeathReason.SIGNAL:
        hint = " (likely out of memory)" if death.killed else ""
        return f"the lowering process died with {death.signal_name}{hint}"
    return f"the lowering process exited with code {exitcode} and no result"


def _apply(message: ChildMessage, outcome: LoweringOutcome, watch: Watch) -> None:
    if isinstance(message, ResultMessage):
        outcome.result = message.result
    elif isinstance(message, ProfileMessage):
        outcome.profile = message.profile
    elif isinstance(message, ErrorMessage):
        outcome.error_code, outcome.error_message = message.error.code, message.error.message
    else:
        outcome.stages.append(message.stage)
        watch.on_stage(message.stage)


def _reap(proc: BaseProcess, grace_seconds: float) -> None:
    proc.join(grace_seconds)
    if proc.is_alive():
        proc.kill()
        proc.join()


def run_lowering(
    standby: StandbyLowering, request: ChildRequest, watch: Watch
) -> tuple[LoweringOutcome, str]:
    """Hand ``request`` to ``standby`` and watch it; returns the outcome and the final Verdict.

    The standby is used up either way: start another for the next job.
    """
    receiver, proc = standby.conn, standby.process
    try:
        send_message(receiver, request)
    except OSError:  # the standby already died (e.g. killed while idle): its exit code says why
        receiver.close()
        _reap(proc, _EXIT_GRACE_SECONDS)
        message = _died_message(proc.exitcode)
        return LoweringOutcome(
            error_code=ErrorCode.COMPILE_CRASHED, error_message=message
        ), Verdict.CONTINUE
    outcome, grace = LoweringOutcome(), 0.0
    deadline = time.monotonic() + watch.timeout_seconds
    next_beat = time.monotonic() + watch.tick_seconds
    try:
        while True:
            if receiver.poll(watch.wait_slice()):
                try:
                    _apply(recv_child_message(receiver), outcome, watch)
                except EOFError:  # the child closed its end: it finished or died
                    grace = _EXIT_GRACE_SECONDS
                    break
                except (ValueError, KeyError, TypeError) as exc:  # not our protocol: kill it
                    outcome.result, outcome.error_code = None, ErrorCode.COMPILE_CRASHED
                    outcome.error_message = f"the lowering process sent a bad message: {exc!r}"
                    return outcome, Verdict.CONTINUE
            if watch.interrupted() or time.monotonic() >= next_beat:
                next_beat = time.monotonic() + watch.tick_seconds
                verdict = watch.heartbeat()
                if verdict != Verdict.CONTINUE:
                    return outcome, verdict
            if time.monotonic() > deadline:
                outcome.error_code = ErrorCode.TIMEOUT
                outcome.error_message = f"lowering took over {watch.timeout_seconds:.0f}s"
                return outcome, Verdict.CONTINUE
    finally:
        receiver.close()
        _reap(proc, grace)
    if outcome.result is None and outcome.profile is None and outcome.error_code is None:
        outcome.error_code = ErrorCode.COMPILE_CRASHED
        outcome.error_message = _died_message(proc.exitcode)
    return outcome, Verdict.CONTINUE
