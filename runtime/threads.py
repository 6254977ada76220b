"""Full-speed single requests (issue 20): a stateless request that finds the pool idle runs
on the pool's wide worker, whose XNNPACK threadpool has every core; while anything else is
in flight, and for ``InFlight.quiet_s`` after requests last overlapped, requests go to the
one-thread workers as before, so under load the busy workers share the cores one thread
each.

Why a worker of its own rather than resizing a worker's threadpool by load: ExecuTorch's
threadpool is one per process, and XNNPACK binds each method to it when the method loads.
``_unsafe_reset_threadpool`` frees the pool a loaded method still uses: measured, the next
``execute`` of a loaded Whisper encoder after resizing from 2 threads to 1 aborted with
``malloc(): unsorted double linked list corrupted``. So every worker sizes its threadpool
once, at start, before it loads anything (``WorkerConfig.threads``), and the pool routes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from pteforge.runtime.processes import WorkerProcess, process_context
from pteforge.runtime.supervisor import Workers
from pteforge.runtime.worker import WorkerConfig
from pteforge.runtime.worker_calls import Calls


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class InFlight:
    """The requests the pool's calls have in flight (waiting for a worker or running), and
    when a request last entered while another was in flight.

    Nothing in flight alone does not make a lone caller: under many clients the count
    drops to 0 between requests often (the HTTP side parses them one at a time), and a
    request sent to the wide worker then competes for the cores with the one-thread
    workers and the HTTP side. So the pool is ``idle`` only once no two requests have
    overlapped for ``quiet_s``.
    """

    def __init__(self, quiet_s: float = 0.1, clock: Callable[[], float] = time.monotonic) -> None:
        self.count = 0
        self.quiet_s = quiet_s
        self.clock = clock
        self.overlapped_at = -float("inf")
        self._lock = threading.Lock()  # the pool's threads and its event loop both count

    def add(self, count: int) -> None:
        """A request entered (1) or left (-1)."""
        with self._lock:
            if count > 0 and self.count > 0:
                self.overlapped_at = self.clock()
            self.count += count

    def idle(self) -> bool:
        """Nothing in flight, and no two requests overlapped in the last ``quiet_s``."""
        return self.count == 0 and self.clock() - self.overlapped_at >= self.quiet_s


class Routes:
    """The pool's calls (one-thread workers) and, when ``wide`` is given, the calls of one
    worker with ``wide`` threads that a stateless request gets when nothing is in flight."""

    def __init__(self, calls: Calls, wide: Calls | None) -> None:
        self.calls = calls
        self.wide = wide

    def stateless(self) -> Calls:
        """Where a stateless request goes now: wide when the pool is idle."""
        in_flight = self.calls.in_flight
        idle = in_flight is None or in_flight.idle()
        return self.wide if self.wide is not None and idle else self.calls

    def each(self) -> tuple[Calls, ...]:
        """Every ``Calls``: the pool's, then the wide worker's if any."""
        return (self.calls,) if self.wide is None else (self.calls, self.wide)

    def set_timeout(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for a worker and for its reply, on every route."""
        for calls in self.each():
            calls.timeout_s = timeout_s

    def sweep(self) -> None:
        """Replace the idle workers that died, on every route."""
        for calls in self.each():
            calls.workers.sweep()

    def close(self) -> None:
        """Stop every worker of every route."""
        for calls in self.each():
            calls.workers.close()


def routes(
    calls: Calls,
    config: WorkerConfig,
    threads: int | None,
    start_timeout_s: float,
    on_lost: Callable[[WorkerProcess, str], None],
) -> Routes:
    """``calls`` and, unless ``threads`` (None: every core) is no more than
    ``config.threads``, a wide worker with ``threads``, counted with ``calls`` (only then
    do requests count themselves in flight: without a wide worker nothing reads it)."""
    threads = threads or usable_cores()
    if threads <= config.threads:
        return Routes(calls, None)
    workers = Workers(
        1,
        process_context(),
        replace(config, threads=threads),
        start_timeout_s=start_timeout_s,
        policy=calls.workers.policy,
        on_start=lambda worker: None,
        on_lost=on_lost,
    )
    calls.in_flight = InFlight()
    wide = Calls(workers, calls.count, calls.timeout_s, calls.in_flight, calls.budget)
    return Routes(calls, wide)
