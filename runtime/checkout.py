"""Idle runtime workers, handed out first-come first-served to threads and coroutines alike.

The pool serves blocking callers (threads) and asyncio callers (the /v2 routes) from the
same workers. A ``queue.Queue`` would force coroutines through a thread hop just to wait
for a worker; here a coroutine waits on a future of its own loop instead. Each caller
also hands over a ``start`` callback, run the moment it is given an item (by whoever
returns it): the worker gets its next request at once instead of idling until the
waiting thread or coroutine is scheduled again.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

W = TypeVar("W")


class _ThreadWaiter(Generic[W]):
    def __init__(self, start: Callable[[W], None]) -> None:
        self.start = start
        self.event = threading.Event()
        self.item: W | None = None

    def offer(self, item: W, checkout: Checkout[W]) -> bool:
        self.start(item)
        self.item = item
        self.event.set()
        return True


class _AsyncWaiter(Generic[W]):
    def __init__(self, loop: asyncio.AbstractEventLoop, start: Callable[[W], None]) -> None:
        self.loop = loop
        self.start = start
        self.future: asyncio.Future[W] = loop.create_future()

    def offer(self, item: W, checkout: Checkout[W]) -> bool:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:  # on the waiter's own loop: start it right here
            if self.future.done():
                return False
            self.start(item)
            self.future.set_result(item)
            return True
        try:
            self.loop.call_soon_threadsafe(self.deliver, item, checkout)
        except RuntimeError:  # that loop is closed: its caller is gone
            return False
        return True

    def deliver(self, item: W, checkout: Checkout[W]) -> None:
        if self.future.done():  # the waiter gave up (timeout or cancellation) meanwhile
            checkout.put(item)
            return
        self.start(item)
        self.future.set_result(item)


class Checkout(Generic[W]):
    """A FIFO of idle items and of callers waiting for one (threads or coroutines)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: deque[W] = deque()
        self._waiters: deque[_ThreadWaiter[W] | _AsyncWaiter[W]] = deque()

    def put(self, item: W) -> None:
        """Return ``item``: the longest-waiting caller gets it, else it becomes idle."""
        while True:
            with self._lock:
                if not self._waiters:
                    self._idle.append(item)
                    return
                waiter = self._waiters.popleft()
            if waiter.offer(item, self):  # outside the lock: a start callback may write
                return

    def get(self, timeout_s: float, start: Callable[[W], None]) -> W | None:
        """An idle item, waiting up to ``timeout_s`` seconds (blocking); ``None`` on timeout.
        ``start(item)`` has run (in this thread or the one returning it) once it is ours."""
        with self._lock:
            idle = self._idle.popleft() if self._idle else None
            if idle is None:
                waiter: _ThreadWaiter[W] = _ThreadWaiter(start)
                self._waiters.append(waiter)
        if idle is not None:
            start(idle)
            return idle
        if not waiter.event.wait(timeout_s):
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                    return None
            waiter.event.wait()  # chosen just as the wait timed out: the offer is under way
        return waiter.item

    async def get_async(self, timeout_s: float, start: Callable[[W], None]) -> W | None:
        """Like ``get``, awaiting on the running loop instead of blocking a thread;
        ``start(item)`` runs on this loop as soon as the item is this caller's."""
        with self._lock:
            idle = self._idle.popleft() if self._idle else None
            if idle is None:
                waiter: _AsyncWaiter[W] = _AsyncWaiter(asyncio.get_running_loop(), start)
                self._waiters.append(waiter)
        if idle is not None:
            start(idle)
            return idle
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
