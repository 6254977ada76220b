"""The HTTP protocol ``pteforge serve`` runs: uvicorn's httptools protocol with bounds for a
server exposed to the network.

- The head of a request (request line and headers) may take at most ``max_header_bytes``:
  past that it gets a 431 and the connection closes, before more of it is parsed or held
  (uvicorn buffers a head of any size, and parsing a 64 MB one stalls every other request).
- The head must arrive within ``header_timeout_s`` of the connection opening or of the
  previous response: a client that sends it slowly (slowloris) gets a 408 and is closed,
  one that sent nothing is closed quietly. A request being handled is never cut; the rest
  of a body that was answered before it came (a 401, 413 or 429) has the same time.
- Idle keep-alive connections close after uvicorn's ``timeout_keep_alive``.
- A response's head goes out with its body, in one write (:class:`HeldHead`).
- A response is over for the app once the client has taken all but the transport's high
  water mark of it (:func:`_drained_at_end`): uvicorn's last ``send`` returned as soon as the
  body was buffered, so what a request held until its answer was sent (a project's share of
  request memory) was given back while a client that read nothing kept the whole answer in
  the server (40 unread 4 MiB ``/v2`` answers: 200 MB, past any share). A client that takes
  nothing of it for ``send_timeout_s`` has its connection closed, so it holds neither that
  share nor the connection for ever.
- The access log leaves out query strings (:class:`QueryStringHidden`); its lines are
  uvicorn's, formatted with less work (:class:`AccessLineFormatter`) and written once
  the response is out (:class:`AfterResponse`).
- A stop ends job event streams first (:class:`DrainingServer`), so they do not hold it.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from asyncio import TimerHandle
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message
from uvicorn import Server
from uvicorn.config import LOGGING_CONFIG, Config
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from pteforge.server.http.access_log import AccessLineFormatter, AfterResponse
from pteforge.server.http.held_head import HeldHead
from pteforge.server.settings import Settings


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` with a bounded head size and a head timeout."""

    max_header_bytes = 64 * 1024
    header_timeout_s = 10.0
    send_timeout_s = 60.0

    @classmethod
    def with_limits(
        cls, max_header_bytes: int, header_timeout_s: float, send_timeout_s: float = 60.0
    ) -> type[GuardedHttpToolsProtocol]:
        """A subclass with these limits (uvicorn builds one protocol per connection)."""
        limits = {
            "max_header_bytes": max_header_bytes,
            "header_timeout_s": header_timeout_s,
            "send_timeout_s": send_timeout_s,
        }
        return type(cls.__name__, (cls,), limits)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes: int | None = 0  # of the head being received; None once parsed
        self._head_timer: TimerHandle | None = None
        self._after_response = AfterResponse(self.access_logger, self.loop)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_bytes is not None:
            room = max(0, self.max_header_bytes - self._head_bytes)
            if len(data) > room:
                super().data_received(data[:room])  # the head may end within the room
                if self._head_bytes is not None:
                    self._refuse(431, "request header fields too large")
                    return
                data = data[room:]
            else:
                self._head_bytes += len(data)
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        self._disarm_head_timer()
        existing = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not existing:  # a new request's cycle (not an upgrade)
            held = HeldHead(self.transport, self.loop, cycle.on_response)
            cycle.transport = held  # type: ignore[assignment]
            cycle.on_response = held.response_complete
            cycle.access_logger = self._after_response  # type: ignore[assignment]
            drained = _drained_at_end(cycle, self.transport, self.send_timeout_s)
            cycle.send = drained  # type: ignore[method-assign,assignment]

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_bytes = 0  # what comes next is the head of the next request
        if self._head_timer is not None:  # answered already: the next head's time from now
            self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.pipeline:
            # waiting for a request's head, or for the rest of a body answered before it
            # came whole (a 401 from the headers): each byte put uvicorn's keep-alive timer
            # off, so a client without a token kept a connection for as long as it trickled
            # its announced body
            self._arm_head_timer()

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        if not self.transport.is_closing():
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._head_bytes:  # part of a head came, too slowly
            self._refuse(408, "request header not received in time")
        elif not self.transport.is_closing():
            self.transport.close()

    def _flush_head(self) -> None:
        transport = getattr(self.cycle, "transport", None)
        if isinstance(transport, HeldHead):
            transport.flush()

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` and close, whatever the parser's state."""
        self._flush_head()  # what the last response wrote goes first
        if self.transport.is_closing():
            return
        body = message.encode()
        head = b"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        length = b"content-length: %d\r\n\r\n" % len(body)
        self.transport.write(STATUS_LINE[status] + head + length + body)
        self.transport.close()


def _drained_at_end(
    cycle: RequestResponseCycle, transport: asyncio.Transport, timeout_s: float
) -> Callable[[Message], Awaitable[None]]:
    """``cycle.send`` whose last body message returns once the transport has written all but
    its high water mark (or the connection is gone: uvicorn then resumes writing), or after
    ``timeout_s`` with the connection closed if the client took nothing meanwhile."""
    send = cycle.send

    async def drained(message: Message) -> None:
        await send(message)  # type: ignore[arg-type]
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            await _drain(cycle, transport, timeout_s)

    return drained


async def _drain(
    cycle: RequestResponseCycle, transport: asyncio.Transport, timeout_s: float
) -> None:
    """Wait until ``transport`` drains; a ``timeout_s`` in which the client took nothing
    (its buffer did not shrink) closes the connection instead."""
    while cycle.flow.write_paused and not cycle.disconnected:
        before = transport.get_write_buffer_size()
        try:
            await asyncio.wait_for(cycle.flow.drain(), timeout_s)
        except TimeoutError:
            if transport.get_write_buffer_size() >= before:  # nothing taken: give up
                transport.abort()
                return


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The uvicorn settings of ``pteforge serve``: httptools and uvloop (they cut the CPU of
    every /v2 call), with the head and idle bounds above."""
    protocol = GuardedHttpToolsProtocol.with_limits(
        settings.http_max_header_bytes,
        settings.http_header_timeout_seconds,
        settings.stream_send_timeout_seconds,
    )
    return {
        "http": protocol,
        "loop": "uvloop",
        "timeout_keep_alive": settings.http_keep_alive_seconds,
        "log_config": _log_config(),
    }


class DrainingServer(Server):
    """uvicorn's server that, on SIGTERM or Ctrl-C, also sets the app's
    ``services.draining`` before its graceful shutdown: otherwise a client following a job's
    event stream held the server until that job ended (a queued one: forever)."""

    def __init__(self, config: Config, app: ASGIApp) -> None:
        super().__init__(config)
        self._app = app

    def handle_exit(self, sig: int, frame: Any) -> None:
        services = getattr(getattr(self._app, "state", None), "services", None)
        if services is not None:  # None: the lifespan has not built them yet
            services.draining.set()
        super().handle_exit(sig, frame)


class QueryStringHidden(logging.Filter):
    """Writes an access line's path without its query string: a client that puts a token in
    the URL (the API refuses it there) would otherwise have it written to the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and "?" in str(args[2]):
            path = str(args[2]).split("?", 1)[0]
            record.args = (args[0], args[1], f"{path}?(query not logged)", *args[3:])
        return True


def _log_config() -> dict[str, Any]:
    """uvicorn's own logging configuration, with :class:`QueryStringHidden` on access lines
    and their lines written by :class:`AccessLineFormatter` (the same lines, cheaper)."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"]["()"] = AccessLineFormatter
    config["filters"] = {"query_hidden": {"()": QueryStringHidden}}
    config["handlers"]["access"]["filters"] = ["query_hidden"]
    return config
