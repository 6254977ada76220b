"""The counters the runtime pool keeps for metrics."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class PoolStats:
    """Counters the pool keeps for metrics; ``count`` adds to them from any thread."""

    requests: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    worker_restarts: int = 0
    worker_crashes: int = 0
    worker_timeouts: int = 0
    weight_cache_enabled: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, **increments: int) -> None:
        """Add each of ``increments`` to the counter of that name."""
        with self._lock:
            for name, amount in increments.items():
                setattr(self, name, getattr(self, name) + amount)
