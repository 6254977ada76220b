"""A least-recently-used map bounded by the total byte size of its values."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ByteLRU(Generic[K, V]):
    """Keeps entries while their summed sizes fit in ``capacity_bytes``.

    The most recently inserted entry is always kept, even when it alone exceeds the
    capacity, so one oversized program can still run. ``on_evict`` is called for
    every entry that is dropped.
    """

    def __init__(self, capacity_bytes: int, on_evict: Callable[[K, V], None] | None = None) -> None:
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._on_evict = on_evict
        self.total_bytes = 0

    def get(self, key: K) -> V | None:
        """The value for ``key`` (marking it most recently used), or ``None``."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: K, value: V, size_bytes: int) -> None:
        """Insert or replace ``key`` and evict least recently used entries over capacity."""
        self.pop(key)
        self._entries[key] = (value, size_bytes)
        self.total_bytes += size_bytes
        while self.total_bytes > self.capacity_bytes and len(self._entries) > 1:
            old_key = next(iter(self._entries))
            old_value = self.pop(old_key)
            if self._on_evict is not None and old_value is not None:
                self._on_evict(old_key, old_value)

    def pop(self, key: K) -> V | None:
        """Remove ``key`` without calling ``on_evict``; returns its value or ``None``."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self.total_bytes -= entry[1]
        return entry[0]

    def keys(self) -> list[K]:
        """Keys from least to most recently used."""
        return list(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
