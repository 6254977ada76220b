"""Handles on runtime worker processes: starting them cleanly, talking to them, killing them."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import select
import shutil
import tempfile
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

import numpy as np

from pteforge.children.forkserver import RUNTIME_WORKER_PRELOAD, start_fork_server
from pteforge.contracts.runtime_messages import ReadyReply, WorkerReply
from pteforge.runtime.errors import RuntimeLayerError
from pteforge.runtime.native_log import leftover
from pteforge.runtime.reply_watch import ReplyWatch
from pteforge.runtime.wire import recv_reply
from pteforge.runtime.worker import WorkerConfig, worker_main

_log = logging.getLogger(__name__)


@dataclass(eq=False)
class WorkerProcess:
    """One worker process and the parent's end of its connection."""

    process: BaseProcess
    conn: Connection
    scratch: Path  # the only directory the confined worker may write; removed with it
    info: ReadyReply | None = None  # the worker's hello, once it said it is ready
    watch: ReplyWatch | None = None  # the event loop's reader of ``conn`` (reply_async)

    def alive(self) -> bool:
        """``process.is_alive()`` in one poll: an exit status already read (``join``,
        ``exitcode``) means it ended, else its sentinel is readable once it has (the status
        waits there, then end of file). ``is_alive`` builds a selector to ask (3.1 us, this
        0.5 us), and every request asks it of the worker it takes. A poll object per call:
        several threads may ask at once."""
        if getattr(getattr(self.process, "_popen", None), "returncode", None) is not None:
            return False
        exited = select.poll()
        exited.register(self.process.sentinel, select.POLLIN)
        return not exited.poll(0)

    def reply(self, timeout_s: float) -> tuple[WorkerReply, list[np.ndarray]]:
        """The reply to the request just sent; ``TimeoutError`` if none within ``timeout_s``."""
        if not self.conn.poll(timeout_s):
            raise TimeoutError
        return recv_reply(self.conn)

    def send(self, frame: bytes) -> OSError | None:
        """Write an encoded request (``wire.encode_message``); the error instead of raising
        it, as this may run in another request's hand-over (the worker may have died)."""
        try:
            self.conn.send_bytes(frame)
        except (OSError, ValueError) as exc:  # ValueError: the connection was closed
            return exc if isinstance(exc, OSError) else OSError(str(exc))
        return None

    async def reply_async(self, timeout_s: float) -> tuple[WorkerReply, list[np.ndarray]]:
        """The reply to the request just sent, without blocking the event loop meanwhile.

        Awaited through the loop's reader callback (``ReplyWatch``: registered once, not
        per reply), then read in one go: the worker writes each frame with a single write,
        so once its first bytes are there the rest follows at memory speed.
        ``TimeoutError`` if nothing comes within ``timeout_s``.
        """
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()
        if self.watch is None:
            self.watch = ReplyWatch(self.conn.fileno())
        if not self.watch.arm(loop, readable):  # watched by another running loop
            return await self._reply_once(loop, readable, timeout_s)
        timer = loop.call_later(timeout_s, _resolve, readable, TimeoutError())
        try:
            await readable
        finally:
            timer.cancel()
            self.watch.disarm()
        return recv_reply(self.conn)

    async def _reply_once(
        self, loop: asyncio.AbstractEventLoop, readable: asyncio.Future[None], timeout_s: float
    ) -> tuple[WorkerReply, list[np.ndarray]]:
        """``reply_async`` with a reader registered for this reply alone."""
        fd = self.conn.fileno()
        loop.add_reader(fd, _resolve, readable, None)
        timer = loop.call_later(timeout_s, _resolve, readable, TimeoutError())
        try:
            await readable
        finally:
            timer.cancel()
            loop.remove_reader(fd)
            os.set_blocking(fd, True)  # uvloop's add_reader made it non-blocking
        return recv_reply(self.conn)

    @classmethod
    def spawn(cls, ctx: Context, config: WorkerConfig) -> WorkerProcess:
        """Start a worker (it then confines itself, loads ExecuTorch and says it is ready)."""
        parent, child = ctx.Pipe()
        scratch = Path(tempfile.mkdtemp(prefix="pteforge-runtime-"))
        process = ctx.Process(
            target=worker_main,
            args=(child, config, str(scratch)),
            daemon=True,
            name="pteforge-runtime",
        )
        process.start()
        child.close()
        return cls(process, parent, scratch)

    def await_ready(self, timeout_s: float) -> WorkerProcess:
        """Wait for the worker's hello; kill it and raise if it does not come."""
        try:
            if not self.conn.poll(timeout_s):
                raise TimeoutError
            info, _ = recv_reply(self.conn)
        except (EOFError, OSError, TimeoutError, RuntimeLayerError) as exc:
            self.kill()
            raise RuntimeLayerError(f"runtime worker failed to start: {exc!r}") from exc
        if not isinstance(info, ReadyReply):
            self.kill()
            message = getattr(info, "message", f"it said {info.kind!r}")
            raise RuntimeLayerError(f"runtime worker failed to start: {message}")
        self.info = info
        return self

    def kill(self) -> None:
        """Stop the process (if still running) and close the connection."""
        if self.watch is not None:
            self.watch.close()
        self.conn.close()
        died = not self.process.is_alive()
        if not died:
            self.process.kill()
        self.process.join(timeout=5)
        last = leftover(self.scratch).rstrip()
        if last:  # a dying word (an abort's reason) is news; at an orderly stop it is not
            level = logging.WARNING if died else logging.DEBUG
            _log.log(level, "runtime worker %s last wrote to stderr:\n%s", self.process.pid, last)
        shutil.rmtree(self.scratch, ignore_errors=True)


def _resolve(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


Context = multiprocessing.context.ForkServerContext


def process_context() -> Context:
    """The fork server that workers start from: it preloads torch and ExecuTorch once (a
    crashed worker is replaced in milliseconds) and was started with a clean environment
    (:func:`~pteforge.children.forkserver.start_fork_server`), unless this process (the
    server) already started it that way with a larger preload list."""
    return start_fork_server(RUNTIME_WORKER_PRELOAD)
