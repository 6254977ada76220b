"""Idle runtime workers, handed out first-come first-served to threads and coroutines alike.

The pool serves blocking callers (threads) and asyncio callers (the /v2 routes) from the
same workers. A ``queue.Queue`` would force coroutines through a thread hop just to wait
for a worker; here a coroutine waits on a future of its own loop instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Generic, TypeVar

W = TypeVar("W")


class _ThreadWaiter(Generic[W]):
    def __init__(self) -> None:
        self.event = threading.Event()
        self.item: W | None = None

    def offer(self, item: W, checkout: Checkout[W]) -> bool:
        self.item = item
        self.event.set()
        return True


class _AsyncWaiter(Generic[W]):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[W] = loop.create_future()

    def offer(self, item: W, checkout: Checkout[W]) -> bool:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        try:
            if running is self.loop:
                self.loop.call_soon(_deliver, self.future, item, checkout)
            else:
                self.loop.call_soon_threadsafe(_deliver, self.future, item, checkout)
        except RuntimeError:  # that loop is closed: its caller is gone
            return False
        return True


def _deliver(future: asyncio.Future[W], item: W, checkout: Checkout[W]) -> None:
    if future.done():  # the waiter gave up (timeout or cancellation) after it was chosen
        checkout.put(item)
    else:
        future.set_result(item)


class Checkout(Generic[W]):
    """A FIFO of idle items and of callers waiting for one (threads or coroutines)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: deque[W] = deque()
        self._waiters: deque[_ThreadWaiter[W] | _AsyncWaiter[W]] = deque()

    def put(self, item: W) -> None:
        """Return ``item``: the longest-waiting caller gets it, else it becomes idle."""
        with self._lock:
            while self._waiters:
                if self._waiters.popleft().offer(item, self):
                    return
            self._idle.append(item)

    def get(self, timeout_s: float) -> W | None:
        """An idle item, waiting up to ``timeout_s`` seconds (blocking); ``None`` on timeout."""
        with self._lock:
            if self._idle:
                return self._idle.popleft()
            waiter: _ThreadWaiter[W] = _ThreadWaiter()
            self._waiters.append(waiter)
        if not waiter.event.wait(timeout_s):
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                    return None
        return waiter.item  # offered (possibly just as the wait timed out)

    async def get_async(self, timeout_s: float) -> W | None:
        """Like ``get``, awaiting on the running loop instead of blocking a thread."""
        with self._lock:
            if self._idle:
                return self._idle.popleft()
            waiter: _AsyncWaiter[W] = _AsyncWaiter(asyncio.get_running_loop())
            self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter.future, timeout_s)
        except TimeoutError:
            return None
        finally:
            with self._lock:
                if waiter in self._waiters:  # never chosen: nothing will be delivered
                    self._waiters.remove(waiter)

    def drain(self) -> list[W]:
        """Take every idle item (used at shutdown)."""
        with self._lock:
            items = list(self._idle)
            self._idle.clear()
        return items
