"""A response's head goes out with its body (``HeldHead``), never later than it would have
alone; the access log's cheaper formatter writes uvicorn's lines exactly, once the
response is out (``AfterResponse``)."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route
from uvicorn.logging import AccessFormatter

from pteforge.server.http.access_log import AccessLineFormatter, AfterResponse
from pteforge.server.http.bounded_httptools import GuardedHttpToolsProtocol, uvicorn_options
from pteforge.server.http.held_head import MERGED_BYTES, HeldHead
from pteforge.server.settings import Settings
from tests.server.service import uvicorn_in_thread

RELEASE = threading.Event()  # the streamed response's body waits for it


class _Recorded:
    """A transport that records what is written to it."""

    def __init__(self) -> None:
        self.writes: list[bytes | memoryview] = []
        self.closed = False

    def write(self, data: bytes | memoryview) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _held(loop: asyncio.AbstractEventLoop) -> tuple[_Recorded, HeldHead, list[str]]:
    recorded, ended = _Recorded(), []
    held = HeldHead(recorded, loop, lambda: ended.append("ended"))  # type: ignore[arg-type]
    return recorded, held, ended


def test_the_head_goes_out_with_the_body_in_one_write() -> None:
    async def respond() -> tuple[list[bytes], list[str]]:
        recorded, held, ended = _held(asyncio.get_running_loop())
        held.write(b"HEAD\r\n\r\n")
        assert recorded.writes == []
        held.write(b"body")
        held.write(b"more")
        held.response_complete()
        await asyncio.sleep(0)  # the end of the turn flushes nothing more
        return recorded.writes, ended

    assert asyncio.run(respond()) == ([b"HEAD\r\n\r\nbody", b"more"], ["ended"])


def test_a_large_body_is_not_copied_to_join_its_head() -> None:
    async def respond() -> list[bytes | memoryview]:
        recorded, held, _ = _held(asyncio.get_running_loop())
        held.write(b"HEAD")
        held.write(memoryview(b"x" * (MERGED_BYTES + 1)))
        return recorded.writes

    head, body = asyncio.run(respond())
    assert head == b"HEAD" and isinstance(body, memoryview)  # the body as the app gave it


def test_a_head_alone_goes_out_by_the_end_of_the_turn_or_of_the_response() -> None:
    async def respond() -> tuple[list[bytes], list[bytes], list[bytes]]:
        loop = asyncio.get_running_loop()
        streamed, held, _ = _held(loop)
        held.write(b"HEAD")
        await asyncio.sleep(0)  # a streamed body's first chunk comes later
        held.write(b"chunk")
        bodiless, held, ended = _held(loop)
        held.write(b"HEAD")
        held.response_complete()  # HEAD, 204: the head is the whole response
        assert ended == ["ended"]
        closed, held, _ = _held(loop)
        held.write(b"HEAD")
        held.close()
        held.flush()
        return streamed.writes, bodiless.writes, closed.writes

    streamed, bodiless, closed = asyncio.run(respond())
    assert streamed == [b"HEAD", b"chunk"]
    assert bodiless == [b"HEAD"] and closed == [b"HEAD"]


def test_nothing_is_written_to_a_connection_lost_meanwhile() -> None:
    async def respond() -> list[bytes]:
        recorded, held, _ = _held(asyncio.get_running_loop())
        held.write(b"HEAD")
        recorded.closed = True  # the client went away before the turn ended
        await asyncio.sleep(0)
        return recorded.writes

    assert asyncio.run(respond()) == []


async def _stream(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        while not RELEASE.is_set():  # until the client has read the head
            await asyncio.sleep(0.01)
        yield b"chunk"

    return StreamingResponse(body(), media_type="text/plain")


async def _plain(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    routes = [Route("/stream", _stream), Route("/", _plain, methods=["GET", "HEAD"])]
    protocol = GuardedHttpToolsProtocol.with_limits(8192, 10.0)
    with uvicorn_in_thread(Starlette(routes=routes), http=protocol) as chosen:
        yield chosen


def _read_until(sock: socket.socket, end: bytes) -> bytes:
    data = b""
    while not data.endswith(end):
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data


def test_a_streamed_head_is_not_held_back_for_its_first_chunk(port: int) -> None:
    RELEASE.clear()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
        head = _read_until(sock, b"\r\n\r\n")  # before any chunk was made
        RELEASE.set()
        body = _read_until(sock, b"0\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"transfer-encoding: chunked" in head
    assert body == b"5\r\nchunk\r\n0\r\n\r\n"


def test_pipelined_and_bodiless_responses_keep_their_order(port: int) -> None:
    requests = b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(requests)
        data = _read_until(sock, b"hello")
    first, _, second = data.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200 ") and b"content-length: 5" in first
    assert second.startswith(b"HTTP/1.1 200 ") and second.endswith(b"\r\n\r\nhello")


@pytest.mark.parametrize("colours", [False, True])
@pytest.mark.parametrize("status", [200, 404, 599])
def test_the_access_lines_are_uvicorns(colours: bool, status: int) -> None:
    config = uvicorn_options(Settings())["log_config"]
    assert config["formatters"]["access"]["()"] is AccessLineFormatter
    fmt = config["formatters"]["access"]["fmt"]
    args = ("127.0.0.1:5000", "POST", "/v2/models/m.forward/infer", "1.1", status)
    record = logging.LogRecord("uvicorn.access", 20, __file__, 0, "%s %s %s %s %d", args, None)
    ours = AccessLineFormatter(fmt, use_colors=colours)
    assert ours.format(record) == AccessFormatter(fmt, use_colors=colours).format(record)
    assert ours.format(record) == ours.format(record)  # the status text, remembered


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_access_lines_are_written_after_the_response_in_order() -> None:
    logger, lines = logging.getLogger("tests.access_after"), _Lines()
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)

    async def respond() -> list[str]:
        after = AfterResponse(logger, asyncio.get_running_loop())
        after.info("%s %d", "first", 200)
        after.info("%s %d", "second", 404)
        assert lines.lines == []  # not before the response's bytes are written
        await asyncio.sleep(0)
        return lines.lines

    try:
        assert asyncio.run(respond()) == ["first 200", "second 404"]
    finally:
        logger.removeHandler(lines)
