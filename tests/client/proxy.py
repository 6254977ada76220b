"""A TCP proxy in front of the real server that misbehaves on purpose, connection by
connection: reset it, answer 503, or cut the answer after some bytes. Everything else is
forwarded byte for byte."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

RESET = "reset"  # close with RST after reading the request head
UNAVAILABLE = "503"  # answer 503 (Retry-After: 0) and close
FORWARD = "forward"


_BODY = b'{"error": {"code": "service_unavailable", "message": "the proxy says: later"}}'
_UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nConnection: close\r\n"
    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(_BODY), _BODY)
)


def cut_after(n: int) -> str:
    """Forward the request, then pass only ``n`` bytes of the answer and reset."""
    return f"cut:{n}"


@dataclass
class FlakyProxy:
    """``plan`` says what happens to each new connection in turn; later ones are forwarded.
    ``heads`` records the request head each connection sent."""

    upstream: tuple[str, int]
    plan: list[str] = field(default_factory=list)
    heads: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                action = self.plan.pop(0) if self.plan else FORWARD
            threading.Thread(target=self._handle, args=(conn, action), daemon=True).start()

    def _handle(self, conn: socket.socket, action: str) -> None:
        with conn:
            head = _read_head(conn)
            self.heads.append(head)
            if action == RESET:
                _reset(conn)
            elif action == UNAVAILABLE:
                conn.sendall(_UNAVAILABLE)
            else:
                limit = int(action.split(":")[1]) if action.startswith("cut:") else None
                self._forward(conn, head, limit)

    def _forward(self, conn: socket.socket, head: bytes, limit: int | None) -> None:
        with socket.create_connection(self.upstream) as up:
            up.sendall(head)
            threading.Thread(target=_pump, args=(conn, up, None), daemon=True).start()
            _pump(up, conn, limit)
            if limit is not None:
                _reset(conn)

    def close(self) -> None:
        self._listener.close()


def _read_head(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _pump(src: socket.socket, dst: socket.socket, limit: int | None) -> None:
    sent = 0
    try:
        while limit is None or sent < limit:
            chunk = src.recv(65536 if limit is None else min(65536, limit - sent))
            if not chunk:
                break
            dst.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass
    with suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@contextmanager
def flaky_proxy(upstream_port: int, plan: list[str]) -> Iterator[FlakyProxy]:
    proxy = FlakyProxy(("127.0.0.1", upstream_port), list(plan))
    thread = threading.Thread(target=proxy.serve, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.close()
        thread.join(timeout=5)
