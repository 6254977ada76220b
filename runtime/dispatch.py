"""One request's way through the pool, written once for blocking and asyncio callers.

``attempts`` is the whole logic: check the pool can serve, take a worker (any, or a
session's own), write the request, wait for the reply, classify a death (a timeout, or a
broken connection: a crash) and retry a stateless request once on another worker. It does
no I/O itself: it yields each ``Step`` it needs done and is sent the outcome (or has the
error thrown in). ``call_blocking`` performs the steps in the calling thread;
``call_async`` performs them on the event loop (only writing a large frame and reaping a
crashed process go to a thread), so the /v2 path never hops threads to wait for a worker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from pteforge.runtime.errors import (
    CrashingInputError,
    RuntimeLayerError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from pteforge.runtime.processes import WorkerProcess

if TYPE_CHECKING:
    from pteforge.runtime.calls import Calls, Reply, Request

# What a crash was, in words, and the process's exit code.
Crash = tuple[str, int | None]


@dataclass(frozen=True)
class Step:
    """What ``attempts`` needs done next, with ``worker``: ``acquire`` it (None: any idle
    worker), ``send`` it the frame, ``reply`` (await its answer), or reap it ``crashed``."""

    op: Literal["acquire", "send", "reply", "crashed"]
    worker: WorkerProcess | None


@dataclass(frozen=True)
class Finished:
    """The outcome of ``attempts``: the reply and the ms it waited for a worker."""

    answer: tuple[Reply, float]


Attempts = Generator[Step, object, "tuple[Reply, float]"]


def attempts(calls: Calls, request: Request, pinned: WorkerProcess | None) -> Attempts:
    """Send ``request`` to ``pinned`` (a session's worker, never retried) or to any worker
    (retried once after a crash); yields the steps, returns the reply and its queue time."""
    crashes: list[Crash] = []
    while True:
        held = yield from _acquire(calls, request, pinned, crashes)
        queue_ms = (time.perf_counter() - request.queued) * 1e3
        try:
            if not request.inline:  # the worker drains a big frame at its own pace
                request.error = cast("OSError | None", (yield Step("send", held)))
            if request.error is not None:
                raise request.error
            reply = yield Step("reply", held)
        except TimeoutError:  # before OSError, its base class
            raise calls.timed_out(held, request.what) from None
        except (EOFError, OSError):
            crashes.append(cast(Crash, (yield Step("crashed", held))))
            if pinned is not None:
                raise WorkerCrashedError(crashes[0][0]) from None
            _raise_if_twice(crashes, request)
            continue
        except BaseException:
            calls.workers.lost(held, "the conversation with it broke off")
            raise
        request.served_by = held
        calls.workers.checkout.put(held)
        return cast("Reply", reply), queue_ms


def _acquire(
    calls: Calls, request: Request, pinned: WorkerProcess | None, crashes: list[Crash]
) -> Generator[Step, object, WorkerProcess]:
    try:
        calls.workers.check()
        worker = yield Step("acquire", pinned)
        if worker is None:
            raise WorkerTimeoutError(f"no runtime worker became free within {calls.timeout_s:.0f}s")
        return cast(WorkerProcess, worker)
    except RuntimeLayerError as exc:
        if crashes:
            raise _unretried(crashes, exc) from exc
        raise


def _raise_if_twice(crashes: list[Crash], request: Request) -> None:
    if len(crashes) < 2:
        return
    codes = ", ".join(str(code) for _, code in crashes)
    raise CrashingInputError(
        f"these inputs crashed the runtime twice, on two workers (exit codes {codes}), "
        f"during {request.what}; the method cannot run them"
    )


def _unretried(crashes: list[Crash], exc: RuntimeLayerError) -> WorkerCrashedError:
    return WorkerCrashedError(f"{crashes[0][0]}; retrying it on another worker failed: {exc}")


def _resume(
    flow: Attempts, value: object = None, error: BaseException | None = None
) -> Step | Finished:
    """Hand ``flow`` the outcome of its last step; its next step, or its answer."""
    try:
        return flow.send(value) if error is None else flow.throw(error)
    except StopIteration as stop:
        return Finished(stop.value)


def call_blocking(calls: Calls, request: Request) -> tuple[Reply, float]:
    """``attempts`` for a blocking caller: every step waits in this thread."""
    flow = attempts(calls, request, None)
    step = _resume(flow)
    while not isinstance(step, Finished):
        try:
            outcome = _perform(calls, request, step)
        except BaseException as exc:
            step = _resume(flow, error=exc)
        else:
            step = _resume(flow, outcome)
    return step.answer


def _perform(calls: Calls, request: Request, step: Step) -> object:
    worker = step.worker
    if step.op == "acquire":
        return calls.workers.checkout.get(calls.timeout_s, request.start, worker)
    assert worker is not None
    if step.op == "send":
        return worker.send(request.frame)
    if step.op == "reply":
        return worker.reply(calls.timeout_s)
    return calls.crashed(worker, request.what)


async def call_async(
    calls: Calls, request: Request, pinned: WorkerProcess | None
) -> tuple[Reply, float]:
    """``attempts`` for an asyncio caller: the loop is never blocked."""
    flow = attempts(calls, request, pinned)
    step = _resume(flow)
    while not isinstance(step, Finished):
        try:
            outcome = await _perform_async(calls, request, step)
        except BaseException as exc:
            step = _resume(flow, error=exc)
        else:
            step = _resume(flow, outcome)
    return step.answer


async def _perform_async(calls: Calls, request: Request, step: Step) -> object:
    worker = step.worker
    if step.op == "acquire":
        return await calls.workers.checkout.get_async(calls.timeout_s, request.start, worker)
    assert worker is not None
    if step.op == "send":
        return await asyncio.to_thread(worker.send, request.frame)
    if step.op == "reply":
        return await worker.reply_async(calls.timeout_s)
    # Crash handling waits for the process to exit: not on the event loop.
    return await asyncio.to_thread(calls.crashed, worker, request.what)
