"""A project's budget of runtime worker deaths: a circuit breaker per scope.

Runtime workers are shared by every project, and a worker that dies ends every session it
held, other projects' included. A hand-made ``.pte`` whose kernels abort (``ET_CHECK``)
kills a worker on every request, so without a bound one project could end every other
project's sessions forever, and cost the pool a respawn per request. ``CrashBudget`` counts
the deaths each scope's requests cause (crashes, and hangs past the call timeout, which
replace the worker: ``Calls.crashed``, ``Calls.timed_out``); once a scope has caused
``CrashLimits.crashes`` within ``window_s`` seconds, its requests are refused before they
reach a worker (``CrashBudgetError``, 429 with ``Retry-After``) until the oldest of those
deaths leaves the window. Other scopes are not affected. Internal calls (``DEFAULT_SCOPE``,
no project) are neither counted nor refused: refusing them would refuse every project.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pteforge.runtime.checkout import DEFAULT_SCOPE
from pteforge.runtime.errors import CrashBudgetError


@dataclass(frozen=True)
class CrashLimits:
    """Worker deaths one scope's requests may cause within ``window_s`` seconds before its
    requests are refused (``PTEFORGE_RUNTIME_CRASHES_PER_PROJECT``,
    ``PTEFORGE_RUNTIME_CRASH_WINDOW_SECONDS``)."""

    crashes: int = 4
    window_s: float = 600.0


class CrashBudget:
    """The worker deaths each scope caused recently, against ``limits`` (None: no budget,
    nothing counted or refused). Thread-safe: deaths are charged from threads and the
    event loop alike."""

    def __init__(
        self, limits: CrashLimits | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self.clock = clock
        self._deaths: dict[str, deque[float]] = {}  # the last ``crashes`` of each scope
        self._lock = threading.Lock()

    def charge(self, scope: str) -> None:
        """``scope``'s request crashed or hung its worker, which was replaced."""
        if self.limits is None or scope == DEFAULT_SCOPE:
            return
        with self._lock:
            deaths = self._deaths.setdefault(scope, deque(maxlen=self.limits.crashes))
            deaths.append(self.clock())

    def check(self, scope: str) -> None:
        """Raise ``refusal(scope)`` if there is one."""
        refusal = self.refusal(scope)
        if refusal is not None:
            raise refusal

    def refusal(self, scope: str) -> CrashBudgetError | None:
        """The error refusing ``scope``'s requests if it has used its budget (naming the
        budget, its deaths and when it reopens), else None. Never raises: ``Request.start``
        asks it as a worker is handed over, in whichever thread hands it over."""
        limits = self.limits
        if limits is None or scope not in self._deaths:  # the common case: no lock needed
            return None
        with self._lock:
            reopens_in = self._reopens_in(scope, limits)
        if reopens_in is None:
            return None
        return CrashBudgetError(
            f"this project's requests crashed or hung {limits.crashes} runtime workers in "
            f"the last {limits.window_s:g}s, its budget "
            f"(PTEFORGE_RUNTIME_CRASHES_PER_PROJECT={limits.crashes} per "
            f"PTEFORGE_RUNTIME_CRASH_WINDOW_SECONDS={limits.window_s:g}); each one ended the "
            "sessions its worker held, other projects' too, so its runtime requests are "
            f"refused until the oldest leaves the window, in {math.ceil(reopens_in)}s",
            retry_after_s=reopens_in,
        )

    def _reopens_in(self, scope: str, limits: CrashLimits) -> float | None:
        """Seconds until ``scope`` is served again, None if it is now (the lock held)."""
        deaths = self._deaths.get(scope)
        if deaths is None:
            return None
        horizon = self.clock() - limits.window_s
        while deaths and deaths[0] <= horizon:  # left the window
            deaths.popleft()
        if not deaths:
            del self._deaths[scope]
        return deaths[0] - horizon if len(deaths) == limits.crashes else None
