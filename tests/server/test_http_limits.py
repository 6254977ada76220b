"""The bounds of ``pteforge serve``'s HTTP protocol, over a real socket: head size, head
timeout (slowloris), idle keep-alive; requests within them are untouched."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from uvicorn.logging import AccessFormatter

from pteforge.server.http.bounded_httptools import GuardedHttpToolsProtocol, uvicorn_options
from pteforge.server.settings import Settings
from tests.server.service import uvicorn_in_thread

MAX_HEAD = 8 * 1024
HEAD_TIMEOUT_S = 1.0
KEEP_ALIVE_S = 1.5


async def echo_size(request: Request) -> PlainTextResponse:
    body = await request.body()
    if "slow" in request.query_params:  # a handler slower than the head timeout
        await asyncio.sleep(HEAD_TIMEOUT_S * 2)
    return PlainTextResponse(str(len(body)))


async def refuse(request: Request) -> PlainTextResponse:
    """A 401 from the headers, the body left unread (as every route answers without a token)."""
    return PlainTextResponse("no token", status_code=401)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    routes = [
        Route("/", echo_size, methods=["GET", "POST"]),
        Route("/refuse", refuse, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    protocol = GuardedHttpToolsProtocol.with_limits(MAX_HEAD, HEAD_TIMEOUT_S)
    with uvicorn_in_thread(app, timeout_keep_alive=KEEP_ALIVE_S, http=protocol) as chosen:
        yield chosen


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _request(path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: t", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_requests_within_the_bounds_pass(port: int) -> None:
    body = b"x" * (512 * 1024)  # head and much body in the first reads: not a big head
    with _connect(port) as sock:
        sock.sendall(_request("/", {"X-Pad": "p" * (MAX_HEAD // 2), "Connection": "close"}, body))
        reply = _read_all(sock)
    assert reply.startswith(b"HTTP/1.1 200 ") and reply.endswith(str(len(body)).encode())


def test_a_head_past_the_limit_is_refused_before_it_ends(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n")
        sent = 0
        try:
            while sent < 64 * 1024 * 1024:  # the 64 MB header of the issue, if let through
                sock.sendall(b"X-Pad: " + b"p" * 65536 + b"\r\n")
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = _read_all(sock)
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:200]
    assert sent < 4 * 1024 * 1024  # closed long before the whole header went out


def test_a_slowloris_head_is_cut_off(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n")
        deadline = time.monotonic() + HEAD_TIMEOUT_S * 10
        sock.settimeout(0.1)
        reply = b""
        while time.monotonic() < deadline:  # one byte at a time, as slowloris does
            try:
                sock.sendall(b"X")
                reply = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            if reply:
                break
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]


def test_a_silent_or_idle_connection_is_closed(port: int) -> None:
    with _connect(port) as silent:
        assert _read_all(silent) == b""  # nothing sent: closed quietly after the timeout
    with _connect(port) as idle:
        idle.sendall(_request("/", {}))
        assert _read_all(idle).startswith(b"HTTP/1.1 200 ")  # then closed when idle


def test_a_body_trickled_after_its_answer_is_cut_off(port: int) -> None:
    """A client answered 401 before its body (no token) that trickles the 1 GB it announced:
    each byte put off uvicorn's keep-alive timer, so it held the connection (a descriptor)
    as long as it liked; the rest of the body has the head's time, then the connection ends."""
    with _connect(port) as sock:
        sock.sendall(b"POST /refuse HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 401 ")
        sock.settimeout(0.1)
        deadline = time.monotonic() + HEAD_TIMEOUT_S * 10
        closed = False
        while not closed and time.monotonic() < deadline:
            try:
                sock.sendall(b"x")
                closed = sock.recv(65536) == b""
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
    assert closed


def test_a_handler_slower_than_the_head_timeout_still_answers(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(_request("/?slow=1", {}))
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")


def test_serve_uses_the_guarded_protocol_with_the_settings() -> None:
    settings = Settings(http_max_header_bytes=4096, http_header_timeout_seconds=3)
    options = uvicorn_options(settings)
    assert issubclass(options["http"], GuardedHttpToolsProtocol)
    assert (options["http"].max_header_bytes, options["http"].header_timeout_s) == (4096, 3)
    assert (options["loop"], options["timeout_keep_alive"]) == ("uvloop", 5.0)


def test_the_access_log_leaves_out_query_strings() -> None:
    """A token a client put in the URL is not written; the path and status are."""
    config = uvicorn_options(Settings())["log_config"]
    assert config["handlers"]["access"]["filters"] == ["query_hidden"]
    hidden = config["filters"]["query_hidden"]["()"]()
    args = ("127.0.0.1:5000", "GET", "/v1/programs?token=pf_secret", "1.1", 401)
    record = logging.LogRecord(
        "uvicorn.access", 20, __file__, 0, '%s - "%s %s HTTP/%s" %d', args, None
    )
    assert hidden.filter(record)
    line = AccessFormatter(config["formatters"]["access"]["fmt"], use_colors=False).format(record)
    assert "pf_secret" not in line
    assert '"GET /v1/programs?(query not logged) HTTP/1.1" 401' in line
