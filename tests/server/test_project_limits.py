"""Per-project bounds on what waiting requests hold, over a real server: the memory and the
number of requests in flight (``server/http/memory.py``: /v1 JSON, uploads, generation, /v2
and gRPC in one ledger) and the job event streams open (``server/jobs/streams.py``). One
project at its limit gets 429; another is served; what it held comes back when its
connections close."""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import torch
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2 as pb
from tritonclient.utils import InferenceServerException

from tests.server.helpers import assert_error, peak_growth_kib
from tests.server.service import ServiceProcess, running_service, wait_until

pytestmark = pytest.mark.server

MIB = 1 << 20


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """64 MiB of request memory (32 per project), 4 requests in flight, 2 event streams and
    3 unfinished jobs a project, and no compile workers, so a job stays queued and its
    stream open."""
    env = {
        "PTEFORGE_REQUEST_MEMORY_BYTES": str(64 * MIB),
        "PTEFORGE_REQUEST_MEMORY_BYTES_PER_PROJECT": str(32 * MIB),
        "PTEFORGE_EVENT_STREAMS_PER_PROJECT": "2",
        "PTEFORGE_REQUESTS_PER_PROJECT": "4",
        "PTEFORGE_UNFINISHED_JOBS_PER_PROJECT": "3",
        "PTEFORGE_COMPILE_WORKERS": "0",
    }
    with running_service(tmp_path_factory.mktemp("home"), env) as svc:
        yield svc


@contextmanager
def sent_headers(service: ServiceProcess, head: str) -> Iterator[socket.socket]:
    """A connection that sent ``head`` (a request's line and headers) and nothing more."""
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as connection:
        connection.sendall(f"{head}Host: t\r\n\r\n".encode())
        yield connection


def announced(
    service: ServiceProcess, path: str, token: str, nbytes: int
) -> AbstractContextManager[socket.socket]:
    """A POST whose headers announce ``nbytes`` of JSON body that never comes: the server
    holds them in the project's share while it waits for it."""
    head = (
        f"POST {path} HTTP/1.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {nbytes}\r\n"
    )
    return sent_headers(service, head)


def answered(connection: socket.socket) -> bytes:
    """The start of the answer on ``connection`` (its socket timeout is the deadline)."""
    return connection.recv(4096)


def until(call: Callable[[], httpx.Response], status: int) -> httpx.Response:
    """``call()`` asked again until it answers ``status`` (a deadline)."""

    def answer() -> httpx.Response | None:
        response = call()
        return response if response.status_code == status else None

    found: httpx.Response = wait_until(answer, 30, f"a {status} answer")
    return found


def test_requests_in_flight_share_one_memory_across_v1_and_v2(limited: ServiceProcess) -> None:
    """/v1 JSON and generation bodies count in the same per-project memory as /v2 bodies: 60
    unfinished 16 MiB /v1 bodies of one project held 1 GB, without bound. A project holding
    its share through /v2 gets 429 on /v1 and on a generation, another project is served, a
    third that would pass the server's total gets 503."""
    a, b, c = (limited.create_token(f"mem-{p}", f"mem-{p}") for p in "abc")
    job = {"program_id": "prog_none", "plan": {}}
    with announced(limited, "/v2/models/m/infer", a, 32 * MIB - 16), limited.client(a) as client:
        refused = until(lambda: client.post("/v1/compile-jobs", json=job), 429)
        assert_error(refused, 429, "too_many_requests")
        assert refused.headers["Retry-After"] == "1"
        assert "PTEFORGE_REQUEST_MEMORY_BYTES_PER_PROJECT" in refused.text
        with announced(limited, "/v1/completions", a, MIB) as generation:
            assert answered(generation).startswith(b"HTTP/1.1 429 ")  # from the headers
        with limited.client(b) as other:
            assert other.post("/v1/compile-jobs", json=job).status_code == 404
            with announced(limited, "/v2/models/m/infer", b, 30 * MIB):
                padded = {**job, "pad": "x" * (3 * MIB)}
                until(lambda: other.post("/v1/compile-jobs", json=padded), 429)  # b's are held
                with announced(limited, "/v1/compile-jobs", c, 5 * MIB) as third:
                    assert answered(third).startswith(b"HTTP/1.1 503 ")
    with limited.client(a) as client:
        until(lambda: client.post("/v1/compile-jobs", json=job), 404)  # the bytes came back


def _upload(client: httpx.Client) -> httpx.Response:
    class AddOne(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    saved = io.BytesIO()
    torch.export.save(torch.export.export(AddOne(), (torch.zeros(2),)), saved)
    return client.post("/v1/programs", files={"forward": ("forward.pt2", saved.getvalue())})


def _program(client: httpx.Client) -> str:
    return str(_upload(client).json()["id"])


def test_a_project_keeps_a_bounded_number_of_requests_in_flight(limited: ServiceProcess) -> None:
    """Each request with a body holds a connection, whatever its bytes: 1,000 uploads of one
    project, each trickling a byte now and then, took every file descriptor of a server
    limited to 1,024, and it answered no one. Past the limit the project's next request with
    a body is refused (429: an upload, a /v2 infer, a gRPC call); another project is served;
    the places come back when the connections close."""
    a, b = (limited.create_token(f"flight-{p}", f"flight-{p}") for p in "ab")
    head = (
        "POST /v1/programs HTTP/1.1\r\nContent-Type: multipart/form-data; boundary=b\r\n"
        f"Authorization: Bearer {a}\r\nContent-Length: {MIB}\r\n"
    )
    infer = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [0.0]}]}
    with ExitStack() as uploads, limited.client(a) as client, limited.client(b) as other:
        for _ in range(4):
            uploads.enter_context(sent_headers(limited, head))
        refused = until(lambda: _upload(client), 429)
        assert_error(refused, 429, "too_many_requests")
        assert "PTEFORGE_REQUESTS_PER_PROJECT" in refused.text
        assert client.post("/v2/models/m/infer", json=infer).status_code == 429
        with triton.InferenceServerClient(f"127.0.0.1:{limited.grpc_port}") as grpc:
            with pytest.raises(InferenceServerException) as error:
                grpc.infer("m", [], headers={"authorization": f"Bearer {a}"})
            assert "RESOURCE_EXHAUSTED" in str(error.value.status())
        assert _upload(other).status_code == 201
    with limited.client(a) as client:
        until(lambda: _upload(client), 201)  # the connections closed: their places came back


def _queued_job(client: httpx.Client) -> str:
    job = client.post("/v1/compile-jobs", json={"program_id": _program(client), "plan": {}})
    return str(job.json()["id"])


def test_a_project_keeps_a_bounded_number_of_unfinished_jobs(limited: ServiceProcess) -> None:
    """Each queued job is a row every worker's claim passes over, and nothing bounded how
    many one project queued. Past the limit a compile is refused (429) until one of the
    project's jobs ends; other projects still queue theirs."""
    a, b = (limited.create_token(f"jobs-{p}", f"jobs-{p}") for p in "ab")
    with limited.client(a) as client, limited.client(b) as other:
        compile_job = {"program_id": _program(client), "plan": {}}
        jobs = [client.post("/v1/compile-jobs", json=compile_job) for _ in range(3)]
        assert [job.status_code for job in jobs] == [202] * 3
        refused = client.post("/v1/compile-jobs", json=compile_job)
        assert_error(refused, 429, "too_many_requests")
        assert "3 unfinished jobs" in refused.text
        assert _queued_job(other).startswith("job")
        assert client.post(f"/v1/jobs/{jobs[0].json()['id']}/cancel").status_code == 200
        assert client.post("/v1/compile-jobs", json=compile_job).status_code == 202


def test_a_project_keeps_a_bounded_number_of_event_streams_open(
    limited: ServiceProcess,
) -> None:
    """Each open job event stream polls the database from the shared threadpool: 200 of one
    project's took another project's GET /v1/artifacts from 1.8 to 61 ms. Past the limit a
    new stream is refused (429) until one closes; other projects keep theirs."""
    a, b = (limited.create_token(f"sse-{p}", f"sse-{p}") for p in "ab")
    with limited.client(a) as client, limited.client(b) as other:
        job, other_job = _queued_job(client), _queued_job(other)
        head = f"GET /v1/jobs/{job}/events HTTP/1.1\r\nAuthorization: Bearer {a}\r\n"
        with sent_headers(limited, head) as first, sent_headers(limited, head) as second:
            for stream in (first, second):
                assert answered(stream).startswith(b"HTTP/1.1 200 ")
            refused = client.get(f"/v1/jobs/{job}/events")
            assert_error(refused, 429, "too_many_requests")
            assert "PTEFORGE_EVENT_STREAMS_PER_PROJECT" in refused.text
            with other.stream("GET", f"/v1/jobs/{other_job}/events") as served:
                assert served.status_code == 200
        until(lambda: _stream_status(client, job), 200)  # closed ones count no more


def _stream_status(client: httpx.Client, job: str) -> httpx.Response:
    with client.stream("GET", f"/v1/jobs/{job}/events") as response:
        return response


def test_a_grpc_call_of_a_project_at_its_share_is_refused_unread(limited: ServiceProcess) -> None:
    """A gRPC message's size is known only once grpcio has read it whole; a project whose
    requests in flight already hold its share gets RESOURCE_EXHAUSTED before its next
    message is read: 24 MiB sent leave the server's memory as it was."""
    a = limited.create_token("grpc-a", "grpc-a")
    tensor = triton.InferInput("input_0", [6 * MIB], "FP32")
    tensor.set_data_from_numpy(np.zeros(6 * MIB, dtype=np.float32))
    headers = {"authorization": f"Bearer {a}"}
    with (
        announced(limited, "/v2/models/m/infer", a, 32 * MIB),  # the whole share
        limited.client(a) as http,
        triton.InferenceServerClient(f"127.0.0.1:{limited.grpc_port}") as client,
    ):
        until(lambda: http.post("/v2/models/m/infer", json={"inputs": []}), 429)  # held

        def refused() -> str:
            with pytest.raises(InferenceServerException) as error:
                client.infer("m", [tensor], headers=dict(headers))
            return str(error.value.status())

        code, grown_kib = peak_growth_kib(limited.proc.pid, refused)
        assert code == "StatusCode.RESOURCE_EXHAUSTED", code
        assert grown_kib < 12 * 1024, grown_kib  # read, it would be 48 MiB and more


def test_a_project_keeps_a_bounded_number_of_grpc_streams_open(limited: ServiceProcess) -> None:
    """An open ModelStreamInfer stream held ~9 KB in the server however idle, and nothing
    bounded how many one token opened (20,000 took 185 MB; attack pass, item 6): each now
    is one of its project's requests in flight, the requests on it counted within its place,
    so the 5th is RESOURCE_EXHAUSTED, another project's stream is served, and the places
    come back when the streams end."""
    a, b = (limited.create_token(f"streams-{p}", f"streams-{p}") for p in "ab")
    ended = threading.Event()

    def one_then_idle() -> Iterator[pb.ModelInferRequest]:
        yield pb.ModelInferRequest(model_name="m")  # answered once the stream is counted
        ended.wait()

    with grpc.insecure_channel(f"127.0.0.1:{limited.grpc_port}") as channel:
        stream = channel.stream_stream(
            "/inference.GRPCInferenceService/ModelStreamInfer",
            request_serializer=pb.ModelInferRequest.SerializeToString,
            response_deserializer=pb.ModelStreamInferResponse.FromString,
        )

        def opened(token: str) -> Any:
            call = stream(one_then_idle(), metadata=[("authorization", f"Bearer {token}")])
            assert "no artifact or model 'm'" in next(call).error_message
            return call

        held = [opened(a) for _ in range(4)]
        with pytest.raises(grpc.RpcError) as refused:
            opened(a)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "PTEFORGE_REQUESTS_PER_PROJECT" in str(refused.value.details())
        held.append(opened(b))
        ended.set()
        for call in held:
            call.cancel()

        def reopened() -> bool:
            try:
                opened(a).cancel()
            except grpc.RpcError:
                return False
            return True

        wait_until(reopened, 30, "a stream once the others ended")
