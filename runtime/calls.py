"""One request to a runtime worker and what happens when the worker dies under it.

A stateless request whose worker crashes is sent once more, to another live worker: only
if that one crashes too is the request itself at fault (``CrashingInputError``, naming the
method). If the retry cannot even start, the server is at fault (``WorkerCrashedError``,
answered 503). A session's request is never retried: its state died with the worker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pteforge.runtime.errors import (
    CrashingInputError,
    PoolClosedError,
    RuntimeLayerError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from pteforge.runtime.processes import WorkerProcess
from pteforge.runtime.supervisor import Workers
from pteforge.runtime.wire import encode_message

# Frames up to this size go into the pipe without waiting on the worker to read them.
ASYNC_INLINE_FRAME_BYTES = 64 * 1024

Reply = tuple[dict[str, Any], list[np.ndarray]]


class Request:
    """One encoded request and the outcome of writing it to a worker.

    The frame is encoded up front: bad inputs fail before a worker is held. ``start`` is
    the hand-over callback (``Checkout``): it writes the frame the moment a worker is
    given, unless the frame is over ``inline_limit`` bytes, which the caller writes itself
    once it holds the worker (off the event loop, for asyncio callers).
    """

    def __init__(
        self, header: dict[str, Any], arrays: Sequence[np.ndarray], inline_limit: float
    ) -> None:
        self.header = header
        self.frame = encode_message(header, arrays)
        self.inline = len(self.frame) <= inline_limit
        self.error: OSError | None = None
        self.queued = time.perf_counter()
        self.served_by: WorkerProcess | None = None  # the worker that answered

    def start(self, worker: WorkerProcess) -> None:
        self.error = worker.send(self.frame) if self.inline else None

    @property
    def what(self) -> str:
        method = f" of method {self.header['method']!r}" if "method" in self.header else ""
        return f"{self.header['op']}{method} of artifact {self.header.get('sha256', '?')[:12]}"


class Calls:
    """Sends requests to the workers of ``workers``; ``count`` records crashes and timeouts."""

    def __init__(self, workers: Workers, count: Callable[..., None], timeout_s: float) -> None:
        self.workers = workers
        self.count = count
        self.timeout_s = timeout_s

    def _acquired(self, worker: WorkerProcess | None) -> WorkerProcess:
        if worker is None:
            raise WorkerTimeoutError(f"no runtime worker became free within {self.timeout_s:.0f}s")
        return worker

    def crashed(self, worker: WorkerProcess, what: str) -> tuple[str, int | None]:
        """Replace a worker whose connection broke mid-request: what happened, in words,
        and its exit code."""
        if self.workers.closed:
            raise PoolClosedError("the runtime pool was shut down mid-request")
        self.count(worker_crashes=1)
        worker.process.join(timeout=5)
        code = worker.process.exitcode
        reason = f"the runtime worker crashed (exit code {code}) during {what}"
        self.workers.lost(worker, reason)
        return reason, code

    def timed_out(self, worker: WorkerProcess, what: str) -> WorkerTimeoutError:
        self.count(worker_timeouts=1)
        reason = f"{what} did not finish within {self.timeout_s:.0f}s"
        self.workers.lost(worker, reason)
        return WorkerTimeoutError(f"{reason}; the runtime worker was stopped and replaced")

    def call(self, request: Request) -> tuple[Reply, float]:
        """Send ``request`` (blocking); the reply and the ms it waited for a worker."""
        crashes: list[tuple[str, int | None]] = []
        while True:
            self.workers.check()
            try:
                worker = self._acquired(self.workers.checkout.get(self.timeout_s, request.start))
            except RuntimeLayerError as exc:
                if crashes:
                    raise _unretried(crashes, exc) from exc
                raise
            queue_ms = (time.perf_counter() - request.queued) * 1e3
            try:
                if request.error is not None:
                    raise request.error
                reply = worker.reply(self.timeout_s)
            except TimeoutError:  # before OSError, its base class
                raise self.timed_out(worker, request.what) from None
            except (EOFError, OSError):
                crashes.append(self.crashed(worker, request.what))
                _raise_if_twice(crashes, request)
                continue
            except BaseException:
                self.workers.lost(worker, "the conversation with it broke off")
                raise
            request.served_by = worker
            self.workers.checkout.put(worker)
            return reply, queue_ms

    async def call_async(
        self, request: Request, worker: WorkerProcess | None = None
    ) -> tuple[Reply, float]:
        """``call`` without blocking the loop; to ``worker`` only when given (a session's,
        never retried), else to any worker (retried once after a crash)."""
        crashes: list[tuple[str, int | None]] = []
        while True:
            held = await self._acquire_async(request, worker, crashes)
            queue_ms = (time.perf_counter() - request.queued) * 1e3
            try:
                if not request.inline:  # the worker drains a big frame at its own pace
                    request.error = await asyncio.to_thread(held.send, request.frame)
                if request.error is not None:
                    raise request.error
                reply = await held.reply_async(self.timeout_s)
            except TimeoutError:  # before OSError, its base class
                raise self.timed_out(held, request.what) from None
            except (EOFError, OSError):
                # Crash handling waits for the process to exit: not on the event loop.
                crashes.append(await asyncio.to_thread(self.crashed, held, request.what))
                if worker is not None:
                    raise WorkerCrashedError(crashes[0][0]) from None
                _raise_if_twice(crashes, request)
                continue
            except BaseException:
                self.workers.lost(held, "the conversation with it broke off")
                raise
            request.served_by = held
            self.workers.checkout.put(held)
            return reply, queue_ms

    async def _acquire_async(
        self, request: Request, worker: WorkerProcess | None, crashes: list[tuple[str, int | None]]
    ) -> WorkerProcess:
        try:
            self.workers.check()
            got = await self.workers.checkout.get_async(self.timeout_s, request.start, worker)
            return self._acquired(got)
        except RuntimeLayerError as exc:
            if crashes:
                raise _unretried(crashes, exc) from exc
            raise


def _raise_if_twice(crashes: list[tuple[str, int | None]], request: Request) -> None:
    if len(crashes) < 2:
        return
    codes = ", ".join(str(code) for _, code in crashes)
    raise CrashingInputError(
        f"these inputs crashed the runtime twice, on two workers (exit codes {codes}), "
        f"during {request.what}; the method cannot run them"
    )


def _unretried(crashes: list[tuple[str, int | None]], exc: RuntimeLayerError) -> WorkerCrashedError:
    return WorkerCrashedError(f"{crashes[0][0]}; retrying it on another worker failed: {exc}")
