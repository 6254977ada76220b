"""/v2 request body limits over a real socket: a body over the server's byte limit, one that
inflates past it, and a JSON body larger than the method's inputs can need are each a 413
before they are parsed; what requests in flight hold is bounded per project and in all."""

from __future__ import annotations

import gzip
import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from pteforge.runtime import RuntimePool
from pteforge.server.http.memory import RequestMemory
from pteforge.server.inference import build_inference_router, new_inference_state
from tests.runtime.conftest import Server
from tests.runtime.helpers import Compiled, MemoryResolver, bearer_auth, serve


def auth() -> dict[str, str]:
    return {"Authorization": "Bearer tok-a"}


@pytest.mark.parametrize("compression", ["", "gzip"])
def test_a_json_body_past_what_the_inputs_hold_is_413(server: Server, compression: str) -> None:
    """mlp.forward takes [1, 16]: a JSON body needs 64 KiB and 48 bytes per element at most.
    8 MB of ``[[],[],...]`` (~170 MB of Python lists once parsed: a 256 MiB body ~5 GiB and
    half a minute holding the GIL) is refused before it is parsed, compressed or not."""
    data = b"[" + b",".join([b"[]"] * 2_700_000) + b"]"
    entry = b'{"name": "input_0", "datatype": "FP32", "shape": [1, 16], "data": ' + data
    body = b'{"inputs": [' + entry + b"}]}"
    headers = {**auth(), "content-type": "application/json"}
    if compression:
        body, headers["content-encoding"] = gzip.compress(body), compression
    url = f"{server.url}/v2/models/mlp.forward/infer"
    response = httpx.post(url, content=body, headers=headers)
    assert response.status_code == 413, response.text
    assert "send large tensors as binary data" in response.json()["error"]
    fits = {
        "inputs": [{"name": "input_0", "datatype": "FP32", "shape": [1, 16], "data": [0.5] * 16}]
    }
    assert httpx.post(url, json=fits, headers=auth()).status_code == 200


@pytest.fixture(scope="module")
def small_limit_server(pool: RuntimePool, artifacts: dict[str, Compiled]) -> Iterator[str]:
    """A /v2 app whose infer bodies may hold at most 4 KiB (the mlp request fits)."""
    resolver = MemoryResolver()
    resolver.add("project-a", "mlp", artifacts["mlp"], as_path=True)
    app = FastAPI()
    router = build_inference_router(
        new_inference_state(
            resolver, pool, bearer_auth, CollectorRegistry(), max_request_bytes=4096
        )
    )
    app.include_router(router)
    with serve(app) as url:
        yield url


def _json_infer_body(compiled: Compiled) -> bytes:
    [tensor] = compiled.model.inputs["forward"]
    payload = {
        "inputs": [
            {
                "name": "input_0",
                "datatype": "FP32",
                "shape": list(tensor.shape),
                "data": tensor.flatten().tolist(),
            }
        ]
    }
    return json.dumps(payload).encode()


def test_request_bodies_over_the_limit_get_413(
    small_limit_server: str, artifacts: dict[str, Compiled]
) -> None:
    url = f"{small_limit_server}/v2/models/mlp.forward/infer"
    body = _json_infer_body(artifacts["mlp"])
    assert len(body) < 4096
    assert httpx.post(url, content=body, headers=auth()).status_code == 200

    padded = body[:-1] + b" " * 8192 + b"}"  # still valid JSON, but over the limit
    declared = httpx.post(url, content=padded, headers=auth())
    assert declared.status_code == 413, declared.text
    assert "exceeds the 4096-byte limit" in declared.json()["error"]

    chunked = httpx.post(url, content=iter([padded[:3000], padded[3000:]]), headers=auth())
    assert chunked.status_code == 413, chunked.text  # no Content-Length: counted while read


def test_compressed_bodies_that_inflate_over_the_limit_get_413(
    small_limit_server: str, artifacts: dict[str, Compiled]
) -> None:
    url = f"{small_limit_server}/v2/models/mlp.forward/infer"
    headers = {**auth(), "Content-Encoding": "gzip"}
    response = httpx.post(url, content=gzip.compress(b" " * 100_000), headers=headers)
    assert response.status_code == 413, response.text
    assert "inflates to over 4096 bytes" in response.json()["error"]
    small = gzip.compress(_json_infer_body(artifacts["mlp"]))
    assert httpx.post(url, content=small, headers=headers).status_code == 200


@pytest.fixture(scope="module")
def memory() -> RequestMemory:
    """6 KiB in all, 4 KiB per project."""
    return RequestMemory(6144, 4096)


@pytest.fixture(scope="module")
def shared_memory_server(
    pool: RuntimePool, artifacts: dict[str, Compiled], memory: RequestMemory
) -> Iterator[str]:
    """A /v2 app whose infer requests in flight may hold ``memory``."""
    resolver = MemoryResolver()
    for project in ("project-a", "project-b"):
        resolver.add(project, "mlp", artifacts["mlp"], as_path=True)
    state = new_inference_state(
        resolver,
        pool,
        bearer_auth,
        CollectorRegistry(),
        max_request_bytes=8192,
        memory=memory,
    )
    app = FastAPI()
    app.include_router(build_inference_router(state))
    with serve(app) as url:
        yield url


@contextmanager
def body_announced(url: str, token: str, nbytes: int) -> Iterator[None]:
    """An infer request whose headers announce ``nbytes`` of body that never comes: the
    server holds them for it until the connection closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as held:
        held.sendall(
            f"POST /v2/models/mlp.forward/infer HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {nbytes}\r\n\r\n".encode()
        )
        yield


def _status_within(
    deadline_s: float, call: Callable[[], httpx.Response], status: int
) -> httpx.Response:
    deadline = time.monotonic() + deadline_s
    while (response := call()).status_code != status and time.monotonic() < deadline:
        time.sleep(0.05)
    assert response.status_code == status, response.text
    return response


def test_requests_in_flight_hold_a_share_of_memory_per_project(
    shared_memory_server: str, artifacts: dict[str, Compiled], memory: RequestMemory
) -> None:
    """Requests waiting with their bodies are what one project could fill the server's memory
    with: past its share its next request gets 429, past the server's all get 503, each with
    Retry-After, while other projects are served; a request that ends gives its bytes back."""
    body = _json_infer_body(artifacts["mlp"])
    url = f"{shared_memory_server}/v2/models/mlp.forward/infer"

    def infer(token: str) -> httpx.Response:
        return httpx.post(url, content=body, headers={"Authorization": f"Bearer {token}"})

    with body_announced(shared_memory_server, "tok-a", 4000):
        refused = _status_within(30, partial(infer, "tok-a"), 429)
        assert refused.headers["Retry-After"] == "1"
        assert "PTEFORGE_REQUEST_MEMORY_BYTES_PER_PROJECT" in refused.json()["error"]
        assert infer("tok-b").status_code == 200
        with body_announced(shared_memory_server, "tok-b", 2000):
            busy = _status_within(30, partial(infer, "tok-b"), 503)
            assert busy.headers["Retry-After"] == "1"
            assert "PTEFORGE_REQUEST_MEMORY_BYTES)" in busy.json()["error"]
        assert _status_within(30, partial(infer, "tok-b"), 200)
    assert _status_within(30, partial(infer, "tok-a"), 200)
    deadline = time.monotonic() + 30  # given back once each answer is sent
    while memory.held and time.monotonic() < deadline:
        time.sleep(0.05)
    assert memory.held == 0


def test_a_request_needing_more_than_a_share_alone_is_413(shared_memory_server: str) -> None:
    url = f"{shared_memory_server}/v2/models/mlp.forward/infer"
    response = httpx.post(url, content=b" " * 5000, headers=auth())
    assert response.status_code == 413, response.text
    assert "more than one project's share of 4096" in response.json()["error"]
