"""One request's way through the pool, written once for blocking and asyncio callers.

``attempts`` is the whole logic: check the caller's project is within its crash budget
(``crash_budget``) and the pool can serve, take a worker (any, or a session's own), write
the request, wait for the reply, classify a death (a timeout, or a broken connection: a
crash) and retry a stateless request once on another worker, one that holds no other
project's sessions (an idle one, else the first returned, else the crashed one's
replacement), so that one bad request ends at most one worker holding them. It does no
I/O itself: it yields each ``Step`` it needs done (a plain tuple) and is sent the
outcome, or has the error thrown in. ``call_blocking`` performs the steps in the calling
thread; ``call_async`` on the event loop (only writing a large frame and reaping a crashed
process go to a thread), so the /v2 path never hops threads to wait for a worker. The
machinery costs a microsecond or two per request against a round trip of about 200 us.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Literal, cast

from pteforge.contracts.et_errors import LOG_HEADER
from pteforge.runtime.errors import (
    CrashingInputError,
    RuntimeLayerError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from pteforge.runtime.processes import WorkerProcess

if TYPE_CHECKING:
    from pteforge.runtime.worker_calls import Calls, Reply, Request

# What a crash was, in words, and the process's exit code.
Crash = tuple[str, int | None]


# What ``attempts`` needs done next, to a worker: ``acquire`` it (None: any idle worker),
# ``send`` it the frame, ``reply`` (wait for its answer), or reap it once ``crashed``.
Op = Literal["acquire", "send", "reply", "crashed"]
Step = tuple[Op, "WorkerProcess | None"]
Answer = tuple["Reply", float]
Attempts = Generator[Step, object, Answer]


def attempts(calls: Calls, request: Request, pinned: WorkerProcess | None) -> Attempts:
    """Send ``request`` to ``pinned`` (a session's worker, never retried) or to any worker
    (retried once after a crash); yields the steps, returns the reply and its queue time.
    The request counts as in flight (``calls.in_flight``: a lone request goes to the wide
    worker, see ``threads``) from now until it ends, however it ends."""
    if calls.in_flight is None:
        return (yield from _attempts(calls, request, pinned))
    calls.in_flight.add(1)
    try:
        return (yield from _attempts(calls, request, pinned))
    finally:
        calls.in_flight.add(-1)


def _attempts(calls: Calls, request: Request, pinned: WorkerProcess | None) -> Attempts:
    crashes: list[Crash] = []
    request.budget = calls.budget  # asked again as the worker is handed over
    while True:
        calls.budget.check(request.scope)  # past its crash budget: not even the retry
        try:
            calls.workers.check()
            got = yield ("acquire", pinned)
            if got is None:
                raise WorkerTimeoutError(
                    f"no runtime worker became free within {calls.timeout_s:.0f}s"
                )
        except RuntimeLayerError as exc:
            if crashes:
                raise _unretried(crashes, exc) from exc
            raise
        held = cast(WorkerProcess, got)
        if request.refused is not None:  # its budget ran out while it waited: nothing sent
            calls.workers.checkout.put(held)
            raise request.refused
        queue_ms = (time.perf_counter() - request.queued) * 1e3
        try:
            if not request.inline:  # the worker drains a big frame at its own pace
                request.error = cast("OSError | None", (yield ("send", held)))
            if request.error is not None:
                raise request.error
            reply = yield ("reply", held)
        except TimeoutError:  # before OSError, its base class
            raise calls.timed_out(held, request.what, request.scope) from None
        except (EOFError, OSError):
            crashes.append(cast(Crash, (yield ("crashed", held))))
            if pinned is not None:
                raise WorkerCrashedError(crashes[0][0]) from None
            _raise_if_twice(crashes, request)
            request.takes = calls.spare(request.scope)  # ends no other project's sessions
            continue
        except BaseException:
            calls.workers.lost(held, "the conversation with it broke off")
            raise
        request.served_by = held
        calls.workers.checkout.put(held)
        return cast("Reply", reply), queue_ms


def _raise_if_twice(crashes: list[Crash], request: Request) -> None:
    if len(crashes) < 2:
        return
    codes = ", ".join(str(code) for _, code in crashes)
    _, header, log = crashes[-1][0].partition(LOG_HEADER)  # the last crash's own lines
    raise CrashingInputError(
        f"these inputs crashed the runtime twice, on two workers (exit codes {codes}), "
        f"during {request.what}; the method cannot run them{header}{log}"
    )


def _unretried(crashes: list[Crash], exc: RuntimeLayerError) -> WorkerCrashedError:
    return WorkerCrashedError(f"{crashes[0][0]}; retrying it on another worker failed: {exc}")


class Stepper:
    """Resumes ``attempts`` with each step's outcome (or error), for either driver."""

    __slots__ = ("answer", "error", "flow", "outcome")

    def __init__(self, flow: Attempts) -> None:
        self.flow = flow
        self.outcome: object = None
        self.error: BaseException | None = None
        self.answer: Answer | None = None

    def next(self) -> Step | None:
        """The next step to perform, or None once ``answer`` is set."""
        try:
            if self.error is None:
                return self.flow.send(self.outcome)
            error, self.error = self.error, None
            return self.flow.throw(error)
        except StopIteration as done:
            self.answer = cast(Answer, done.value)
            return None


def call_blocking(calls: Calls, request: Request) -> Answer:
    """``attempts`` for a blocking caller: every step waits in this thread."""
    run = Stepper(attempts(calls, request, None))
    while (step := run.next()) is not None:
        try:
            run.outcome = _perform(calls, request, *step)
        except BaseException as exc:
            run.error = exc
    return cast(Answer, run.answer)


def _perform(calls: Calls, request: Request, op: Op, worker: WorkerProcess | None) -> object:
    if op == "acquire":
        return calls.workers.checkout.get(calls.timeout_s, request, worker)
    assert worker is not None
    if op == "reply":
        return worker.reply(calls.timeout_s)
    if op == "send":
        return worker.send(request.frame)
    return calls.crashed(worker, request.what, request.scope)


async def call_async(calls: Calls, request: Request, pinned: WorkerProcess | None) -> Answer:
    """``attempts`` for an asyncio caller: the loop is never blocked."""
    run = Stepper(attempts(calls, request, pinned))
    while (step := run.next()) is not None:
        try:
            run.outcome = await _awaitable(calls, request, *step)
        except BaseException as exc:
            run.error = exc
    return cast(Answer, run.answer)


def _awaitable(
    calls: Calls, request: Request, op: Op, worker: WorkerProcess | None
) -> Awaitable[object]:
    """``_perform``'s step as an awaitable: acquiring and waiting for the reply on the event
    loop, the blocking steps (writing the frame; reaping a crash, which waits for the process
    to exit) in a thread."""
    if op == "acquire":
        return calls.workers.checkout.get_async(calls.timeout_s, request, worker)
    if op == "reply":
        assert worker is not None
        return worker.reply_async(calls.timeout_s)
    return asyncio.to_thread(_perform, calls, request, op, worker)
