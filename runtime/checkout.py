"""Idle runtime workers, handed out fairly across scopes to threads and coroutines alike.

The pool serves blocking callers (threads) and asyncio callers (the /v2 routes) from the
same workers. A ``queue.Queue`` would force coroutines through a thread hop just to wait
for a worker; here a coroutine waits on a future of its own loop instead. Each caller
(a ``Caller``: the pool's is the request itself) has a ``start``, run the moment it is
given an item (by whoever returns it): the worker gets its next request at once instead of
idling until the waiting thread or coroutine is scheduled again.

An item that sat idle is checked with ``usable`` before it is handed out (a worker may
have died while idle); one that fails goes to ``on_unusable`` and the next is tried. A
caller may also wait for one particular item (a session's worker). ``forget`` wakes the
callers waiting for an item that will never come back, ``abort`` every general caller.

Callers wait in their scope (a project, as sessions are scoped; ``DEFAULT_SCOPE`` for
internal calls): a returned item goes to the scopes in turn (round-robin, first come first
served within one, a caller for that very item before the scope's general callers:
``turns.py``), so a project that floods the pool, its sessions' worker included, holds at
most one turn ahead of another project's caller, not its whole backlog. A general caller
may take only some items (``takes``: a crashed request's retry takes only a worker that
holds no other project's sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from pteforge.runtime.turns import Turns

W = TypeVar("W")

DEFAULT_SCOPE = ""
"""The scope of callers that name none (internal calls, tests): a scope like any other."""


Fits = Callable[[W], bool] | None
"""Which items a general caller takes (None: any)."""


class Caller(Protocol[W]):
    """Who waits for an item: the scope whose turn it waits in, which items it ``takes``,
    and what to do the moment it is given one (``start``, run by whoever hands it over)."""

    scope: str
    takes: Fits[W]

    def start(self, item: W) -> None:
        """Begin using ``item``, now ours (e.g. write the request to the worker)."""


class _Waiter(Generic[W]):
    """A caller while it waits: its scope and the items it takes, read once."""

    def __init__(self, caller: Caller[W]) -> None:
        self.start = caller.start
        self.scope = caller.scope
        self.takes = caller.takes

    def fits(self, item: W) -> bool:
        return self.takes is None or self.takes(item)


class _ThreadWaiter(_Waiter[W]):
    def __init__(self, caller: Caller[W]) -> None:
        super().__init__(caller)
        self.event = threading.Event()
        self.item: W | None = None
        self.error: BaseException | None = None

    def offer(self, item: W, checkout: Checkout[W]) -> bool:
        self.start(item)
        self.item = item
        self.event.set()
        return True

    def fail(self, error: BaseException | None) -> None:
        self.error = error
        self.event.set()


class _AsyncWaiter(_Waiter[W]):
    def __init__(self, loop: asyncio.AbstractEventLoop, caller: Caller[W]) -> None:
        super().__init__(caller)
        self.loop = loop
        self.future: asyncio.Future[W | None] = loop.create_future()

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

    def fail(self, error: BaseException | None) -> None:
        def settle() -> None:
            if self.future.done():
                return
            if error is None:
                self.future.set_result(None)
            else:
                self.future.set_exception(error)

        with contextlib.suppress(RuntimeError):  # that loop is closed: its caller is gone
            self.loop.call_soon_threadsafe(settle)


Waiter = _ThreadWaiter[W] | _AsyncWaiter[W]


class Checkout(Generic[W]):
    """A FIFO of idle items, and of callers waiting for one (threads or coroutines) served
    round-robin across their scopes."""

    def __init__(
        self,
        usable: Callable[[W], bool] = lambda item: True,
        on_unusable: Callable[[W], None] = lambda item: None,
    ) -> None:
        self._lock = threading.Lock()
        self._idle: deque[W] = deque()
        self._waiters: Turns[W, Waiter[W]] = Turns()
        self._usable = usable
        self._on_unusable = on_unusable

    def put(self, item: W) -> None:
        """Return ``item``: the first scope in turn with a caller for it gets it (its caller
        for this item first, else its longest-waiting one), else it becomes idle."""
        while True:
            with self._lock:
                waiter = self._next_waiter(item)
                if waiter is None:
                    self._idle.append(item)
                    return
            if waiter.offer(item, self):  # outside the lock: a start callback may write
                return

    def _next_waiter(self, item: W) -> Waiter[W] | None:
        return self._waiters.next_for(item)

    def _take_idle(self, waiter: Waiter[W]) -> W | None:
        """The first idle item ``waiter`` takes that passes ``usable`` (checked outside the
        lock)."""
        while True:
            with self._lock:
                item = self._pop_fitting(waiter)
                if item is None:
                    return None
            if self._usable(item):
                return item
            self._on_unusable(item)

    def _pop_fitting(self, waiter: Waiter[W]) -> W | None:
        """The first idle item ``waiter`` takes, taken out (the lock held)."""
        if not self._idle or waiter.takes is None:
            return self._idle.popleft() if self._idle else None
        item = next((i for i in self._idle if waiter.fits(i)), None)
        if item is not None:
            self._idle.remove(item)
        return item

    def _enqueue(self, waiter: Waiter[W], item: W | None) -> W | None:
        """Take ``item`` (or any usable idle item ``waiter`` takes, when None) now, else
        queue ``waiter``."""
        if item is None:
            idle = self._take_idle(waiter)
            if idle is not None:
                return idle
        with self._lock:
            if item is None:
                fitting = self._pop_fitting(waiter)  # returned while we looked: go round again
                if fitting is not None:
                    return fitting
                self._waiters.append(waiter)
            elif item in self._idle:
                self._idle.remove(item)
                return item
            else:
                self._waiters.append(waiter, item)
        return None

    def _withdraw(self, waiter: Waiter[W]) -> bool:
        """Remove a waiter that was never chosen; False if it was chosen (or failed)."""
        with self._lock:
            return self._waiters.remove(waiter)

    def get(self, timeout_s: float, caller: Caller[W], item: W | None = None) -> W | None:
        """An idle item (``item`` itself when given, else one that ``caller`` takes),
        waiting up to ``timeout_s`` seconds (blocking) in its scope's turn; ``None`` on
        timeout or when it was forgotten. ``caller.start(item)`` has run (in this thread or
        the one returning it) once it is ours. Raises ``abort``'s error."""
        waiter: _ThreadWaiter[W] = _ThreadWaiter(caller)
        got = self._enqueue(waiter, item)
        if got is not None:
            waiter.start(got)
            return got
        if not waiter.event.wait(timeout_s) and self._withdraw(waiter):
            return None
        waiter.event.wait()  # chosen just as the wait timed out: the offer is under way
        if waiter.error is not None:
            raise waiter.error
        return waiter.item

    async def get_async(
        self, timeout_s: float, caller: Caller[W], item: W | None = None
    ) -> W | None:
        """Like ``get``, awaiting on the running loop instead of blocking a thread;
        ``caller.start(item)`` runs on this loop as soon as the item is this caller's."""
        loop = asyncio.get_running_loop()
        waiter: _AsyncWaiter[W] = _AsyncWaiter(loop, caller)
        got = self._enqueue(waiter, item)
        if got is not None:
            waiter.start(got)
            return got
        try:
            return await asyncio.wait_for(waiter.future, timeout_s)
        except TimeoutError:
            return None
        finally:
            self._withdraw(waiter)  # never chosen: nothing will be delivered

    def forget(self, item: W) -> bool:
        """Drop ``item`` for good: out of the idle queue (True if it was there), and every
        caller waiting for it in particular gets ``None``."""
        with self._lock:
            idle = item in self._idle
            if idle:
                self._idle.remove(item)
            waiters = self._waiters.drain_item(item)
        for waiter in waiters:
            waiter.fail(None)
        return idle

    def abort(self, error: BaseException) -> None:
        """Fail every caller waiting for any item with ``error``."""
        with self._lock:
            waiters = self._waiters.drain_general()
        for waiter in waiters:
            waiter.fail(error)

    def waiting(self) -> dict[str, int]:
        """How many callers wait now, for any item or for one in particular, per scope (a
        snapshot)."""
        with self._lock:
            return self._waiters.waiting()

    def idle(self) -> list[W]:
        """The idle items now (a snapshot)."""
        with self._lock:
            return list(self._idle)
