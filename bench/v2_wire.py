"""Binary-tensor /v2 infer requests on one raw keep-alive socket, for the benchmarks.

The client shares the machine's cores with the server, so it spends as little CPU as a
client can (about a third of ``http.client``'s per request): requests are encoded by hand
and responses parsed only as far as their lengths.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping
from typing import Any

import numpy as np

DTYPES = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}
NUMPY = {"FP32": np.float32, "INT64": np.int64}
_LENGTHS = re.compile(rb"(?i)\r\n(content-length|inference-header-content-length): *(\d+)")


def infer_request(
    model: str, arrays: list[np.ndarray], parameters: Mapping[str, Any] | None = None
) -> bytes:
    """The whole HTTP/1.1 request inferring ``model`` on ``arrays``, outputs in binary."""
    tensors = [
        {"name": f"input_{i}", "datatype": DTYPES[a.dtype], "shape": list(a.shape),
         "parameters": {"binary_data_size": a.nbytes}}
        for i, a in enumerate(arrays)
    ]  # fmt: skip
    params = dict(parameters or {}, binary_data_output=True)
    head = json.dumps({"inputs": tensors, "parameters": params}).encode()
    body = head + b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)
    return (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Length: {len(body)}\r\nInference-Header-Content-Length: {len(head)}\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + body


class Connection:
    """One keep-alive HTTP/1.1 connection to the server on ``port``."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pending = b""

    def _read_until(self, data: bytes, size: int) -> bytes:
        chunks = [data]
        while size > 0:
            chunk = self.sock.recv(max(size, 65536))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def exchange(self, request: bytes) -> tuple[bytes, dict[bytes, int], bytes]:
        """Send ``request``; the response's status line, its length headers and its body."""
        self.sock.sendall(request)
        data = self.pending
        while (end := data.find(b"\r\n\r\n")) < 0:
            data = self._read_until(data, 1)
        lengths = {k.lower(): int(v) for k, v in _LENGTHS.findall(data, 0, end)}
        total = end + 4 + lengths.get(b"content-length", 0)
        data = self._read_until(data, total - len(data))
        self.pending = data[total:]
        return data[:12], lengths, data[end + 4 : total]


def first_output(lengths: dict[bytes, int], body: bytes) -> np.ndarray:
    """The first output tensor of a binary infer response."""
    split = lengths[b"inference-header-content-length"]
    output = json.loads(body[:split])["outputs"][0]
    data = np.frombuffer(body[split:], NUMPY[output["datatype"]])
    return data.reshape(output["shape"])
