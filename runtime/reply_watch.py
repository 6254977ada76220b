"""Waiting on the event loop for a worker's reply without registering its connection anew
for every reply.

``loop.add_reader`` then ``remove_reader`` around each reply cost uvloop nine syscalls
(libuv probes the fd with an epoll ADD and DEL, makes it non-blocking, adds it through
io_uring; removing it deletes it three times) and ours to make it blocking again: 10.8 us
a wait on a socketpair, against 4.7 us for a reader left registered (measured in
process). A ``ReplyWatch`` keeps a duplicate of the connection's fd registered with the
loop that first waited on it, blocking as before (the loop only polls it; a duplicate
shares the blocking flag, so it is set back once, at registration), and each wait only
sets the future the reader resolves, once one ``poll`` says the reply is there.

The duplicate is the watch's own fd: the connection may be closed from any thread
(``WorkerProcess.kill``) without pulling an fd from under the loop, whose registration is
removed, and the duplicate closed, on the loop's own thread. The loop's reader must not
fire again and again while nobody waits: when the fd is readable and no wait is under
way (a blocking caller's reply, a dead worker's end of file), the watch steps off the loop
and the next wait registers it again.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
import weakref


class ReplyWatch:
    """Resolves a future when connection fd ``fd`` (not owned) becomes readable, on the
    event loop of the first caller to :meth:`arm` it (a closed loop's successor takes
    over)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._dup: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # where _dup is registered
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._lock = threading.Lock()  # close() may come from any thread
        self._finalizer: weakref.finalize | None = None

    def arm(self, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]) -> bool:
        """Resolve ``waiter`` once the connection is readable, ``loop`` being the running
        loop; False if another running loop watches it (wait as before, then)."""
        if self._closed:
            raise OSError("the connection to the runtime worker is closed")
        if self._loop is not loop and not self._register(loop):
            return False
        self._waiter = waiter
        return True

    def disarm(self) -> None:
        """The wait is over (resolved, timed out or cancelled)."""
        self._waiter = None

    def close(self) -> None:
        """The connection is closing (from any thread): stop watching it, on the loop's
        thread if a loop watches it, and close the duplicate."""
        with self._lock:
            self._closed = True
            loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._unwatch)
                return
            except RuntimeError:  # that loop is closed, its registration with it
                pass
        self._unwatch(on_loop=False)

    def _register(self, loop: asyncio.AbstractEventLoop) -> bool:
        with self._lock:
            if self._closed:
                raise OSError("the connection to the runtime worker is closed")
            if self._loop is not None and not self._loop.is_closed():
                return False
            if self._dup is None:
                self._dup = os.dup(self._fd)
                self._finalizer = weakref.finalize(self, os.close, self._dup)
            loop.add_reader(self._dup, self._readable)
            os.set_blocking(self._dup, True)  # uvloop's add_reader made it non-blocking
            self._loop = loop
        return True

    def _readable(self) -> None:
        # Asked again: a loop may run a call it queued before the last reply was read (the
        # selector loop does), and a blocking read must not follow a call without data.
        if self._dup is None or not _has_data(self._dup):
            return
        waiter = self._waiter
        if waiter is None:  # nobody waits for what came: off the loop until someone does
            self._unwatch()
        elif not waiter.done():
            waiter.set_result(None)  # its task reads the reply next

    def _unwatch(self, on_loop: bool = True) -> None:
        with self._lock:
            if on_loop and self._loop is not None and self._dup is not None:
                self._loop.remove_reader(self._dup)
            self._loop = None
            if not self._closed:
                return
            if self._finalizer is not None:
                self._finalizer()  # closes the duplicate, once
                self._dup = self._finalizer = None
        waiter = self._waiter
        if on_loop and waiter is not None and not waiter.done():
            waiter.set_result(None)  # its read of the closed connection fails at once


def _has_data(fd: int) -> bool:
    """Whether ``fd`` is readable now (data or end of file), without blocking."""
    ready = select.poll()
    ready.register(fd, select.POLLIN)
    return bool(ready.poll(0))
