"""An infer answer the client does not read still counts in its project's share of request
memory, over a real socket with the HTTP protocol ``pteforge serve`` runs.

uvicorn's last ``send`` of a response returned as soon as the body was in the transport's
buffer, so the share was given back while the whole answer still sat in the server: a project
whose clients read nothing (16 bytes in, megabytes out each) held as much memory as it liked,
past its share (40 unread 4 MiB answers: 200 MB)."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from pteforge.runtime import RuntimePool
from pteforge.server.http.bounded_httptools import uvicorn_options
from pteforge.server.http.memory import RequestMemory
from pteforge.server.inference import build_inference_router, new_inference_state
from pteforge.server.settings import Settings
from tests.models import export_methods
from tests.runtime.helpers import MemoryResolver, bearer_auth, compile_pte, serve

ANSWER_BYTES = 8 << 20
"""More than the kernel's socket buffers take for a client that reads nothing (its receive
buffer is 4 KiB, the server's send buffer at most 4 MiB on Linux by default)."""
BODY = json.dumps(
    {
        "inputs": [{"name": "input_0", "datatype": "FP32", "shape": [1, 4], "data": [1] * 4}],
        "parameters": {"binary_data_output": True},
    }
).encode()


class Repeat(torch.nn.Module):
    """16 bytes in, ``ANSWER_BYTES`` out."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.repeat(1, ANSWER_BYTES // 16)


@pytest.fixture(scope="module")
def big_app(pool: RuntimePool, tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    """A /v2 app whose projects may each hold one and a half answers."""
    model = export_methods(Repeat(), {"forward": (torch.ones(1, 4),)})
    compiled = compile_pte(model, Path(tmp_path_factory.mktemp("repeat")) / "repeat.pte")
    resolver = MemoryResolver()
    resolver.add("project-a", "big", compiled, as_path=True)
    memory = RequestMemory(4 * ANSWER_BYTES, ANSWER_BYTES * 3 // 2)
    state = new_inference_state(resolver, pool, bearer_auth, CollectorRegistry(), memory=memory)
    app = FastAPI()
    app.include_router(build_inference_router(state))
    return app


@pytest.fixture(scope="module")
def big_answers(big_app: FastAPI) -> Iterator[str]:
    """``big_app`` behind the ``pteforge serve`` protocol."""
    with serve(big_app, **uvicorn_options(Settings())) as url:
        yield url


def _unread(url: str) -> socket.socket:
    """A connection that asked for an answer and has read its first 12 bytes only."""
    host, port = url.removeprefix("http://").split(":")
    unread = socket.socket()
    unread.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    unread.connect((host, int(port)))
    unread.sendall(
        f"POST /v2/models/big.forward/infer HTTP/1.1\r\nHost: {host}\r\n"
        "Authorization: Bearer tok-a\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n".encode()
        + BODY
    )
    assert unread.recv(12) == b"HTTP/1.1 200"  # the answer is written, not yet taken
    return unread


def _infer(url: str) -> httpx.Response:
    headers = {"Authorization": "Bearer tok-a", "Content-Type": "application/json"}
    return httpx.post(f"{url}/v2/models/big.forward/infer", content=BODY, headers=headers)


def test_an_unread_answer_holds_its_share_until_the_client_takes_it(big_answers: str) -> None:
    with _unread(big_answers) as unread:
        refused = _infer(big_answers)
        assert refused.status_code == 429, refused.text
        assert "PTEFORGE_REQUEST_MEMORY_BYTES_PER_PROJECT" in refused.json()["error"]
        taken = 12
        while taken < ANSWER_BYTES:  # the whole answer, once the client reads it
            chunk = unread.recv(1 << 20)
            assert chunk, "the server closed the connection mid-answer"
            taken += len(chunk)
    deadline = time.monotonic() + 30  # and the share comes back
    while (answer := _infer(big_answers)).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answer.status_code == 200, answer.text
    assert len(answer.content) > ANSWER_BYTES


def test_a_client_that_takes_nothing_is_cut_off_and_its_share_comes_back(
    big_app: FastAPI,
) -> None:
    """A client that never reads its answer held its project's share and its connection for
    as long as it stayed connected; past the send timeout with nothing taken, both go."""
    options = uvicorn_options(Settings(stream_send_timeout_seconds=1.0))
    with serve(big_app, **options) as url, _unread(url) as unread:
        deadline = time.monotonic() + 60
        while (answer := _infer(url)).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert answer.status_code == 200, answer.text
        unread.settimeout(30)
        taken = 12
        with contextlib.suppress(ConnectionResetError):
            while chunk := unread.recv(1 << 20):
                taken += len(chunk)
        assert taken < ANSWER_BYTES  # cut off mid-answer
