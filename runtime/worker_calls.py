"""One request to a runtime worker and what happens when the worker dies under it.

A stateless request whose worker crashes is sent once more, to another worker, one that
holds no other project's sessions (``Calls.spare``): only if that one crashes too is the
request itself at fault (``CrashingInputError``, naming the
method). If the retry cannot even start, the server is at fault (``WorkerCrashedError``,
answered 503). A session's request is never retried: its state died with the worker.
The logic is written once (``dispatch.attempts``); ``call`` and ``call_async`` only differ
in how they wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from pteforge.contracts.et_errors import log_suffix
from pteforge.contracts.runtime_messages import WorkerReply, WorkerRequest
from pteforge.runtime import dispatch
from pteforge.runtime.checkout import DEFAULT_SCOPE
from pteforge.runtime.crash_budget import CrashBudget
from pteforge.runtime.errors import (
    CrashBudgetError,
    PoolClosedError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from pteforge.runtime.native_log import leftover
from pteforge.runtime.processes import WorkerProcess
from pteforge.runtime.sessions import Sessions
from pteforge.runtime.supervisor import Workers
from pteforge.runtime.wire import encode_message

if TYPE_CHECKING:
    from pteforge.runtime.threads import InFlight

# Frames up to this size go into the pipe without waiting on the worker to read them.
ASYNC_INLINE_FRAME_BYTES = 64 * 1024

Reply = tuple[WorkerReply, list[np.ndarray]]


class Request:
    """One encoded request and the outcome of writing it to a worker.

    The frame is encoded up front: bad inputs fail before a worker is held. A request is
    the ``Caller`` that waits in ``Checkout``: ``start`` writes the frame the moment a worker is
    given, unless the frame is over ``inline_limit`` bytes, which the caller writes itself
    once it holds the worker (off the event loop, for asyncio callers). It waits for a
    worker in ``scope``'s turn (the caller's project, as sessions are scoped: ``Checkout``).
    A project that used its crash budget while it waited (``budget``, set by the caller) is
    refused at the hand-over: nothing is written, ``refused`` holds the error, and the
    caller gives the worker back.
    """

    def __init__(
        self,
        message: WorkerRequest,
        arrays: Sequence[np.ndarray],
        inline_limit: float,
        scope: str = DEFAULT_SCOPE,
    ) -> None:
        self.message = message
        self.scope = scope
        self.frame = encode_message(message, arrays)
        self.inline = len(self.frame) <= inline_limit
        self.error: OSError | None = None
        self.queued = time.perf_counter()
        self.served_by: WorkerProcess | None = None  # the worker that answered
        self.takes: Callable[[WorkerProcess], bool] | None = None  # which workers (None: any)
        self.budget: CrashBudget | None = None  # asked again as a worker is handed over
        self.refused: CrashBudgetError | None = None  # then: the frame was not sent

    def start(self, worker: WorkerProcess) -> None:
        self.refused = None if self.budget is None else self.budget.refusal(self.scope)
        if self.refused is None:
            self.error = worker.send(self.frame) if self.inline else None

    @property
    def what(self) -> str:
        """The request in words, for errors: ``infer of method 'forward' of artifact 1a2b...``."""
        message = self.message
        if message.op == "drop":
            return f"drop of sessions {list(message.drop)}"
        if message.op == "cancel":
            return "cancelling a generation"
        method = f" of method {message.method!r}" if message.op in ("infer", "generate") else ""
        return f"{message.op}{method} of artifact {message.sha256[:12]}"


class Calls:
    """Sends requests to the workers of ``workers``; ``count`` records crashes and timeouts,
    ``budget`` charges each to the scope whose request caused it (``dispatch`` refuses a
    scope's requests once it has used its budget); ``sessions`` says which workers a
    crashed request is retried on (``spare``)."""

    def __init__(
        self,
        workers: Workers,
        count: Callable[..., None],
        timeout_s: float,
        in_flight: InFlight | None = None,
        budget: CrashBudget | None = None,
        sessions: Sessions | None = None,
    ) -> None:
        self.workers = workers
        self.count = count
        self.timeout_s = timeout_s
        self.in_flight = in_flight  # requests waiting or running (``threads.Routes``)
        self.budget = budget or CrashBudget(None)
        self.sessions = sessions  # whose sessions each worker holds, for retries

    def spare(self, scope: str) -> Callable[[WorkerProcess], bool] | None:
        """Which workers a crashed request of ``scope`` is retried on: those that hold no
        other scope's sessions (a second crash ends no other project's state; the crashed
        worker's replacement holds none), None (any) without sessions."""
        sessions = self.sessions
        if sessions is None:
            return None
        return lambda worker: not sessions.others_on(worker, scope)

    def crashed(self, worker: WorkerProcess, what: str, scope: str) -> tuple[str, int | None]:
        """Replace a worker whose connection broke mid-request (of ``scope``, charged with
        it): what happened, in words, and its exit code."""
        if self.workers.closed:
            raise PoolClosedError("the runtime pool was shut down mid-request")
        self.count(worker_crashes=1)
        self.budget.charge(scope)
        worker.process.join(timeout=5)
        code = worker.process.exitcode
        reason = f"the runtime worker crashed (exit code {code}) during {what}"
        reason += log_suffix(leftover(worker.scratch))  # e.g. why it aborted
        self.workers.lost(worker, reason)
        return reason, code

    async def crashed_error(
        self, worker: WorkerProcess, what: str, scope: str
    ) -> WorkerCrashedError:
        """:meth:`crashed` off the event loop, as the error to raise."""
        reason, _ = await asyncio.to_thread(self.crashed, worker, what, scope)
        return WorkerCrashedError(reason)

    def timed_out(self, worker: WorkerProcess, what: str, scope: str) -> WorkerTimeoutError:
        """Replace a worker that did not answer ``scope``'s request in time (charged with
        it); the error to raise."""
        self.count(worker_timeouts=1)
        self.budget.charge(scope)
        reason = f"{what} did not finish within {self.timeout_s:.0f}s"
        self.workers.lost(worker, reason)
        return WorkerTimeoutError(f"{reason}; the runtime worker was stopped and replaced")

    def call(self, request: Request) -> tuple[Reply, float]:
        """Send ``request`` (blocking); the reply and the ms it waited for a worker."""
        return dispatch.call_blocking(self, request)

    async def call_async(
        self, request: Request, worker: WorkerProcess | None = None
    ) -> tuple[Reply, float]:
        """``call`` without blocking the loop; to ``worker`` only when given (a session's,
        never retried), else to any worker (retried once after a crash)."""
        return await dispatch.call_async(self, request, worker)
