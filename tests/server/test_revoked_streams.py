"""Streams opened with a token end once it is revoked: a job's event stream and a gRPC
``ModelStreamInfer`` stream ran on for as long as the client kept them open."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator

import grpc
import httpx
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as rpc

from pteforge.storage import SqlStore, default_sqlite_url, open_store
from tests.server.service import ServiceProcess, running_service, wait_until

pytestmark = pytest.mark.server

PROJECT = "default"


@pytest.fixture(scope="module")
def quiet_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A server without compile workers: a job stays queued, its stream open."""
    env = {"PTEFORGE_COMPILE_WORKERS": "0", "PTEFORGE_RUNTIME_POOL_SIZE": "1"}
    with running_service(tmp_path_factory.mktemp("revoked"), env) as svc:
        yield svc


@pytest.fixture
def store(quiet_service: ServiceProcess) -> Iterator[SqlStore]:
    store = open_store(default_sqlite_url(quiet_service.home), migrate=False)
    yield store
    store.close()


def _token(store: SqlStore, name: str) -> tuple[str, str, str]:
    """A new token of PROJECT: its project id, id and plaintext."""
    with store.transaction() as tx:
        project = tx.projects.get_by_name(PROJECT)
        assert project is not None
        issued = tx.tokens.create(project.id, name)
    return project.id, issued.token.id, issued.plaintext


def _revoke(store: SqlStore, project_id: str, token_id: str) -> None:
    with store.transaction() as tx:
        assert tx.tokens.revoke(project_id, token_id)


def _until_the_end(lines: Iterator[str], timeout: float) -> list[str]:
    """The stream's lines until it ends (a keep-alive comes every 15 s while it is open)."""
    deadline, seen = time.monotonic() + timeout, []
    for line in lines:
        seen.append(line)
        assert time.monotonic() < deadline, f"the stream is still open: {seen}"
    return seen


def test_a_job_event_stream_ends_when_its_token_is_revoked(
    quiet_service: ServiceProcess, store: SqlStore
) -> None:
    project_id, token_id, token = _token(store, "events")
    with store.transaction() as tx:
        job = tx.jobs.enqueue(project_id, "compile", {})  # no worker takes it
    headers = {"Authorization": f"Bearer {token}"}
    url = f"{quiet_service.url}/v1/jobs/{job.id}/events"
    with httpx.stream("GET", url, headers=headers, timeout=60) as events:
        assert events.status_code == 200
        lines = events.iter_lines()
        first = [next(lines), next(lines)]
        assert first[1] == "event: job", first  # the job as queued: the stream is open
        _revoke(store, project_id, token_id)
        rest = _until_the_end(lines, timeout=60)
    assert "event: error" in rest and "event: end" not in rest, rest
    assert any("unauthorized" in line for line in rest), rest
    again = httpx.get(url, headers=headers)
    assert again.status_code == 401


def test_a_grpc_stream_ends_unauthenticated_when_its_token_is_revoked(
    quiet_service: ServiceProcess, store: SqlStore
) -> None:
    project_id, token_id, token = _token(store, "grpc")
    requests: queue.Queue[pb.ModelInferRequest | None] = queue.Queue()
    missing = pb.ModelInferRequest(model_name="art_none.forward")
    with grpc.insecure_channel(f"127.0.0.1:{quiet_service.grpc_port}") as channel:
        stub = rpc.GRPCInferenceServiceStub(channel)
        answers = stub.ModelStreamInfer(
            iter(requests.get, None), metadata=(("authorization", f"Bearer {token}"),)
        )
        requests.put(missing)
        assert "art_none" in next(answers).error_message  # the stream serves
        _revoke(store, project_id, token_id)

        def refused() -> grpc.StatusCode | None:
            requests.put(missing)
            try:
                next(answers)
            except grpc.RpcError as exc:
                return exc.code()
            return None

        code = wait_until(refused, timeout=30, what="the stream to end")
        requests.put(None)
    assert code == grpc.StatusCode.UNAUTHENTICATED
