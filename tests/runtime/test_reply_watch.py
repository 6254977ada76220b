"""``ReplyWatch``: a worker connection's reader registered with the event loop once, not
per reply; it steps off the loop when nobody waits, and closes from any thread."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator

import pytest
import uvloop

from pteforge.runtime.reply_watch import ReplyWatch


class _CountingLoop(asyncio.SelectorEventLoop):
    """A loop that counts its readers' registrations and removals."""

    def __init__(self) -> None:
        super().__init__()
        self.added = self.removed = 0

    def add_reader(self, *args: object) -> None:  # type: ignore[override]
        self.added += 1
        super().add_reader(*args)  # type: ignore[arg-type]

    def remove_reader(self, fd: object) -> bool:  # type: ignore[override]
        self.removed += 1
        return super().remove_reader(fd)  # type: ignore[arg-type]


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, worker = socket.socketpair()
    yield ours, worker
    ours.close()
    worker.close()


async def _wait(watch: ReplyWatch, ours: socket.socket) -> bytes:
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()
    assert watch.arm(loop, readable)
    try:
        await asyncio.wait_for(readable, 10)
    finally:
        watch.disarm()
    return ours.recv(16)


def test_replies_are_awaited_with_one_registration(pair: tuple[socket.socket, ...]) -> None:
    ours, worker = pair
    loop = _CountingLoop()

    async def replies() -> list[bytes]:
        watch, got = ReplyWatch(ours.fileno()), []
        for reply in (b"one", b"two", b"three"):
            loop.call_later(0.01, worker.send, reply)  # while the wait is under way
            got.append(await _wait(watch, ours))
        return got

    try:
        assert loop.run_until_complete(replies()) == [b"one", b"two", b"three"]
    finally:
        loop.close()
    assert (loop.added, loop.removed) == (1, 0)
    assert os.get_blocking(ours.fileno())  # the connection stays blocking for threads


def test_a_reply_nobody_waits_for_steps_the_watch_off_the_loop(
    pair: tuple[socket.socket, ...],
) -> None:
    ours, worker = pair
    loop = _CountingLoop()

    async def unexpected() -> bytes:
        watch = ReplyWatch(ours.fileno())
        worker.send(b"first")
        assert await _wait(watch, ours) == b"first"
        worker.send(b"read by a thread")  # no wait under way: not spun on
        while loop.removed == 0:
            await asyncio.sleep(0)
        assert ours.recv(16) == b"read by a thread"
        worker.send(b"next")
        return await _wait(watch, ours)  # registered again

    try:
        assert loop.run_until_complete(unexpected()) == b"next"
    finally:
        loop.close()
    assert (loop.added, loop.removed) == (2, 1)


def test_closing_from_another_thread_ends_the_wait_and_the_duplicate(
    pair: tuple[socket.socket, ...],
) -> None:
    ours, _ = pair

    async def closed() -> int:
        loop = asyncio.get_running_loop()
        watch = ReplyWatch(ours.fileno())
        readable: asyncio.Future[None] = loop.create_future()
        assert watch.arm(loop, readable)
        duplicate = watch._dup
        assert duplicate is not None
        closer = threading.Thread(target=watch.close)
        closer.start()
        await asyncio.wait_for(readable, 10)  # resolved: the read that follows fails
        closer.join()
        with pytest.raises(OSError):
            watch.arm(loop, loop.create_future())
        return duplicate

    duplicate = uvloop.run(closed())
    with pytest.raises(OSError):
        os.fstat(duplicate)  # closed, on the loop's thread


def test_another_running_loop_waits_its_own_way(pair: tuple[socket.socket, ...]) -> None:
    ours, worker = pair
    watch = ReplyWatch(ours.fileno())
    first = asyncio.new_event_loop()
    try:
        worker.send(b"x")
        first.run_until_complete(_wait(watch, ours))  # registered on ``first``, still open

        async def elsewhere() -> bool:
            loop = asyncio.get_running_loop()
            return watch.arm(loop, loop.create_future())

        assert not asyncio.run(elsewhere())
    finally:
        first.close()
    watch.close()
