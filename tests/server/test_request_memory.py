"""What requests in flight may hold (``server/http/memory.py``'s ``RequestMemory``),
on its own: a project's share, the server's total, a request too large for any share, bytes
given back when a request ends however it ends, and the gRPC frontend counting its messages
in the same ledger as HTTP (the HTTP side over a real socket: ``test_http_limits``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import grpc
import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from tritonclient.grpc import service_pb2 as pb

from pteforge.runtime.metadata import MethodSignature, TensorSpec
from pteforge.runtime.oip_codec import InferRequest, RequestedOutput
from pteforge.runtime.validation import JSON_BYTES_PER_ELEMENT
from pteforge.server.grpc_api.plans import RequestPlans
from pteforge.server.grpc_api.service import infer
from pteforge.server.grpc_api.status import grpc_status
from pteforge.server.http.memory import (
    OverShareError,
    ProjectMemoryError,
    ProjectRequestsError,
    RequestMemory,
    ServerMemoryError,
)
from pteforge.server.http.uploads import MultipartUpload, store_upload
from pteforge.server.inference.statuses import status_of


def test_a_project_past_its_share_gets_429_and_the_server_past_its_total_503() -> None:
    memory = RequestMemory(total=100, per_project=60)
    with memory.holding("a") as first:
        first.grow(50)
        with memory.holding("a") as second, pytest.raises(ProjectMemoryError) as refused:
            second.grow(20)
        assert status_of(refused.value) == (429, {"Retry-After": "1"})
        with memory.holding("b") as other:
            other.grow(40)  # another project is still served
            with memory.holding("c") as third, pytest.raises(ServerMemoryError) as busy:
                third.grow(20)
            assert status_of(busy.value) == (503, {"Retry-After": "1"})
    assert memory.held == 0
    with memory.holding("a") as again:
        again.grow(60)  # the share is whole again


def test_a_project_past_its_number_of_requests_gets_429_and_places_come_back_once() -> None:
    memory = RequestMemory(total=100, requests_per_project=2)
    first, second = memory.holding("a"), memory.holding("a")
    with pytest.raises(ProjectRequestsError, match="2 requests in flight") as refused:
        memory.holding("a")
    assert status_of(refused.value) == (429, {"Retry-After": "1"})
    with memory.holding("b"):  # another project is still served
        assert memory.requests_of("b") == 1
    first.release()
    first.release()  # a request released twice (its answer sent, then its block ended)
    assert memory.requests_of("a") == 1
    with second, memory.holding("a"):
        assert memory.requests_of("a") == 2
    assert memory.requests_of("a") == memory.requests_of("b") == 0


def test_a_request_larger_than_a_share_alone_is_413_and_bytes_come_back_on_errors() -> None:
    memory = RequestMemory(total=100)  # a project's share: half
    with memory.holding("a") as held:
        held.grow(30)
        held.grow(20)  # 50 fits
        with pytest.raises(OverShareError, match="share of 50"):
            held.grow(4)
        assert memory.held == 50
    with pytest.raises(ValueError), memory.holding("a") as failing:
        failing.grow(10)
        raise ValueError("the request failed")
    assert memory.held == 0


def test_a_run_counts_its_inputs_and_the_most_its_outputs_can_take() -> None:
    """An answer's size is known before the method runs (its outputs' shapes, or bounds of
    dynamic ones): a 4-byte request whose answer takes 1 GiB is refused up front."""
    signature = MethodSignature(
        "forward",
        (TensorSpec("x", "float32", (1,)),),
        (
            TensorSpec("big", "float32", (1 << 28,)),
            TensorSpec("ids", "int64", (-1,), max_shape=(16,)),
            TensorSpec("unbounded", "float32", (-1,)),
        ),
    )
    memory = RequestMemory(total=64 << 30)
    binary = [RequestedOutput(spec.name, binary=True) for spec in signature.outputs]
    with memory.holding("a") as held:
        held.grow_by_run(InferRequest(None, [np.zeros(1, dtype=np.float32)], binary), signature)
        assert held.nbytes == 4 + (1 << 30) + 16 * 8
    # an answer as JSON holds its text, ~19 bytes a float32 (40 unread JSON answers of a
    # 1 MiB output held 195 MiB where 40 were counted): 48 bytes an element more
    as_json = [RequestedOutput("ids", binary=False), RequestedOutput("big", binary=True)]
    with memory.holding("a") as held:
        held.grow_by_run(InferRequest(None, [], as_json), signature)
        assert held.nbytes == (1 << 30) + 16 * (8 + JSON_BYTES_PER_ELEMENT)
    small = RequestMemory(total=1 << 30)  # a share of 512 MiB
    with small.holding("b") as held, pytest.raises(OverShareError):
        held.grow_by_run(InferRequest(None, [], binary), signature)
    assert small.held == 0


def test_grpc_messages_count_in_the_same_memory() -> None:
    """A ``ModelInferRequest`` is counted (its size) before anything else is done with it, so
    a project holding its share over HTTP gets RESOURCE_EXHAUSTED over gRPC."""
    memory = RequestMemory(total=1000, per_project=500)
    state = SimpleNamespace(memory=memory)
    request = pb.ModelInferRequest(model_name="mlp", raw_input_contents=[b"\0" * 64])
    with memory.holding("project-a") as http_request:
        http_request.grow(450)
        with pytest.raises(ProjectMemoryError) as refused:
            asyncio.run(infer(state, "project-a", request, RequestPlans()))  # type: ignore[arg-type]
    assert grpc_status(refused.value)[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert memory.held == 0


def test_an_upload_counts_in_flight_until_it_is_stored(tmp_path: Path) -> None:
    """An upload holds its connection and its files on disk while the sandbox checks it: it
    counted among its project's requests in flight only while its body came, so uploads
    waiting for their check were not bounded (12 uploads 50 ms apart, each checked for about
    0.5 s, were all served under a limit of 2)."""
    memory = RequestMemory(total=1 << 30, requests_per_project=1)
    settings = SimpleNamespace(uploads_dir=tmp_path, max_upload_bytes=1 << 20)
    services = SimpleNamespace(settings=settings, memory=memory)
    counted_while_stored = []

    def store(services: object, project_id: str, upload: MultipartUpload) -> str:
        counted_while_stored.append(memory.requests_of(project_id))
        return upload.files[0].field_name

    async def upload(request: Request) -> PlainTextResponse:
        stored = await store_upload(request, services, "p", store)  # type: ignore[arg-type]
        return PlainTextResponse(stored)

    app = Starlette(routes=[Route("/upload", upload, methods=["POST"])])
    app.state.services = services
    with TestClient(app) as client:
        answer = client.post("/upload", files={"part": ("f.bin", b"bytes")})
    assert answer.text == "part" and counted_while_stored == [1]
    assert memory.requests_of("p") == 0
