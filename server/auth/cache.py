"""A small bounded cache whose entries expire after a fixed time to live.

Used to keep per-request database lookups (bearer token -> principal, artifact id ->
content hash) off the /v2 hot path while revocations and deletions still take effect
within ``ttl_s`` seconds. The clock is injectable so expiry is testable without sleeping.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """At most ``max_entries`` values, each served for ``ttl_s`` seconds after it was put.

    ``ttl_s <= 0`` turns caching off (``get`` always misses). Least recently put entries
    are evicted first. Thread-safe.
    """

    def __init__(
        self,
        ttl_s: float,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value put under ``key`` less than ``ttl_s`` ago, else ``None``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires, value = entry
            if self._clock() >= expires:
                del self._entries[key]
                return None
            return value

    def put(self, key: K, value: V) -> None:
        """Remember ``value`` under ``key`` for ``ttl_s`` seconds (no-op when ttl_s <= 0)."""
        if self.ttl_s <= 0:
            return
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (self._clock() + self.ttl_s, value)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def discard(self, key: K) -> None:
        """Forget ``key`` now."""
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget every entry now."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
