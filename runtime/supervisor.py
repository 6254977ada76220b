"""The pool's worker processes: started, handed out alive, replaced with back-off.

A worker that died while idle is noticed when it would be handed out (and by the pool's
periodic sweep) and replaced; the request goes to another worker. Replacements start one
after another in a thread; a failed start is retried after a growing delay, and after
``RestartPolicy.attempts`` failures in a row the supervisor gives up with a clear error:
the pool serves with the workers it still has, and with none left every request (waiting
or new) fails with ``PoolUnavailableError`` until a later request, ``retry_after_s`` on,
starts another round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pteforge.runtime.checkout import Checkout
from pteforge.runtime.errors import PoolClosedError, PoolUnavailableError, RuntimeLayerError
from pteforge.runtime.processes import Context, WorkerProcess
from pteforge.runtime.worker import WorkerConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestartPolicy:
    """How replacement workers are started after a worker is lost."""

    attempts: int = 6  # failed starts in a row before giving up
    first_delay_s: float = 0.1  # delay after the first failure, doubled after each
    max_delay_s: float = 5.0
    retry_after_s: float = 30.0  # after giving up, a request may start a new round


class Workers:
    """``size`` worker processes, a ``Checkout`` of the idle ones, and their replacement."""

    def __init__(
        self,
        size: int,
        ctx: Context,
        config: WorkerConfig,
        *,
        start_timeout_s: float,
        policy: RestartPolicy,
        on_start: Callable[[WorkerProcess], None],
        on_lost: Callable[[WorkerProcess, str], None],
    ) -> None:
        self.size = size
        self.config = config
        self.policy = policy
        self.checkout: Checkout[WorkerProcess] = Checkout(self._alive, self._died_idle)
        self.live: set[WorkerProcess] = set()
        self.failure: str | None = None
        self._ctx = ctx
        self._start_timeout_s = start_timeout_s
        self._on_start = on_start
        self._on_lost = on_lost
        self._lock = threading.Lock()
        self._missing = 0
        self._restarting = False
        self._gave_up_at = 0.0
        self._closed = threading.Event()
        for worker in self._start(size):
            self.checkout.put(worker)

    def _start(self, count: int) -> list[WorkerProcess]:
        spawned = [WorkerProcess.spawn(self._ctx, self.config) for _ in range(count)]
        ready = [w.await_ready(self._start_timeout_s) for w in spawned]
        for worker in ready:
            with self._lock:
                self.live.add(worker)
            self._on_start(worker)
        return ready

    @staticmethod
    def _alive(worker: WorkerProcess) -> bool:
        return worker.alive()

    def _died_idle(self, worker: WorkerProcess) -> None:
        code = worker.process.exitcode
        self.lost(worker, f"the runtime worker died while idle (exit code {code})")

    def lost(self, worker: WorkerProcess, reason: str) -> None:
        """Stop ``worker`` if it still runs, forget it and start a replacement."""
        with self._lock:
            if worker not in self.live:
                return
            self.live.discard(worker)
            self._missing += 1
        worker.kill()
        self._on_lost(worker, reason)  # before waking its waiters: they read the outcome
        self.checkout.forget(worker)
        self._restart()

    def sweep(self) -> None:
        """Replace idle workers that died since they were last used."""
        for worker in self.checkout.idle():
            if not self._alive(worker) and self.checkout.forget(worker):
                self._died_idle(worker)

    def check(self) -> None:
        """Raise unless a request can be served: the pool is open and has a worker."""
        if self._closed.is_set():
            raise PoolClosedError("the runtime pool is shut down")
        if self.failure is None:
            return
        if time.monotonic() - self._gave_up_at >= self.policy.retry_after_s:
            self._restart()
        if not self.live:
            raise PoolUnavailableError(self.failure, retry_after_s=self.policy.retry_after_s)

    def _restart(self) -> None:
        with self._lock:
            if self._restarting or self._closed.is_set() or self._missing == 0:
                return
            self._restarting = True
        threading.Thread(target=self._restart_loop, daemon=True, name="pteforge-respawn").start()

    def _restart_loop(self) -> None:
        failures, delay = 0, self.policy.first_delay_s
        while True:
            with self._lock:
                if self._closed.is_set() or self._missing == 0:
                    self._restarting = False
                    return
            try:
                (worker,) = self._start(1)
            except RuntimeLayerError as exc:
                failures += 1
                if failures >= self.policy.attempts:
                    self._give_up(failures, exc)
                    return
                self._closed.wait(delay)
                delay = min(2 * delay, self.policy.max_delay_s)
                continue
            failures, delay, self.failure = 0, self.policy.first_delay_s, None
            with self._lock:
                self._missing -= 1
            if self._closed.is_set():
                worker.kill()
            self.checkout.put(worker)

    def _give_up(self, failures: int, exc: Exception) -> None:
        message = (
            f"{self._missing} of {self.size} runtime workers could not be restarted "
            f"({failures} attempts in a row failed, the last with: {exc})"
        )
        log.error("%s; retrying on a request in %.0fs", message, self.policy.retry_after_s)
        with self._lock:
            self.failure, self._gave_up_at = message, time.monotonic()
            self._restarting = False
            idle = not self.live
        if idle:  # nobody will ever hand a worker to the callers waiting now
            self.checkout.abort(
                PoolUnavailableError(message, retry_after_s=self.policy.retry_after_s)
            )

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def ready(self) -> bool:
        """True while open and at least one worker is running."""
        return not self._closed.is_set() and any(w.alive() for w in list(self.live))

    def close(self) -> None:
        """Stop every worker; waiting callers fail with ``PoolClosedError``."""
        self._closed.set()
        with self._lock:
            workers, self.live = list(self.live), set()
        for worker in workers:
            worker.kill()
        self.checkout.abort(PoolClosedError("the runtime pool is shut down"))
