"""Streams opened with a token end once it is revoked: a job's event stream and a gRPC
``ModelStreamInfer`` stream ran on for as long as the client kept them open, and text
generation streams (``/v1/completions``, ``/v1/chat/completions``, ``/v1/responses``, ``/v2``
generate_stream) to their ``max_tokens`` or the request timeout."""

from __future__ import annotations

import http.client
import json
import queue
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import httpx
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as rpc

from pteforge.storage import SqlStore, default_sqlite_url, open_store
from tests.generation.lm_builder import LmFiles
from tests.server.lm_serving import deploy_lm
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


# -- text generation ------------------------------------------------------------------------

LONG = {"max_tokens": 1000, "temperature": 0}  # past the tiny LM's context: it fills it
CHAT = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def lm_model(quiet_service: ServiceProcess, lm: LmFiles) -> str:
    """The tiny LM deployed in PROJECT, served once (described, its files local)."""
    with quiet_service.client(quiet_service.admin_token) as admin:
        model = deploy_lm(admin, lm)
        body = {"model": model, "prompt": "warm", "max_tokens": 2}
        assert admin.post("/v1/completions", json=body).status_code == 200
    return model


def _revoke_with_the_cli(svc: ServiceProcess, name: str) -> None:
    """``pteforge tokens revoke`` of PROJECT's token called ``name``, as an operator does."""
    command = [sys.executable, "-m", "pteforge", "tokens"]
    listing = subprocess.run(
        [*command, "list", "--project", PROJECT], env=svc.env, capture_output=True, text=True
    )
    (token_id,) = [
        row.split("\t")[0] for row in listing.stdout.splitlines() if f"\t{name}\t" in row
    ]
    revoke = [*command, "revoke", token_id, "--project", PROJECT]
    subprocess.run(revoke, env=svc.env, capture_output=True, check=True)


def _past_authentication(svc: ServiceProcess, path: str, token: str, body: bytes) -> socket.socket:
    """A request whose headers were accepted: the server reads a body (and so answers
    ``100 Continue``) only once the caller is authenticated. Its body is not sent yet."""
    sock = socket.create_connection(("127.0.0.1", svc.port), timeout=60)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Expect: 100-continue\r\n\r\n"
    )
    sock.sendall(head.encode())
    interim = b""
    while not interim.endswith(b"\r\n\r\n"):
        interim += sock.recv(1)
    assert interim.startswith(b"HTTP/1.1 100 "), interim
    return sock


def _events_after(sock: socket.socket, body: bytes) -> list[str]:
    """The ``data:`` lines of the answer once ``body`` is sent, read to the stream's end
    (the socket's 60 s timeout is the deadline)."""
    with sock:
        sock.sendall(body)
        answer = http.client.HTTPResponse(sock, method="POST")
        answer.begin()
        assert answer.status == 200
        lines = answer.read().decode().splitlines()
    return [line for line in lines if line.startswith("data:")]


def _refused(svc: ServiceProcess, path: str, token: str) -> bool:
    """Whether the generation routes refuse ``token`` now (its cached entry has expired)."""
    answer = httpx.post(f"{svc.url}{path}", json={}, headers={"Authorization": f"Bearer {token}"})
    return answer.status_code == 401


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"prompt": "The quick brown fox", "stream": True, **LONG}),
        ("/v1/completions", {"prompt": ["a", "b"], "n": 2, "stream": True, **LONG}),
        ("/v1/chat/completions", {"messages": CHAT, "stream": True, **LONG}),
        ("/v2/models/{model}/generate_stream", {"text_input": "The quick brown fox", **LONG}),
    ],
)
def test_a_generation_stream_ends_when_its_token_is_revoked(
    quiet_service: ServiceProcess, lm_model: str, path: str, body: dict[str, object]
) -> None:
    """The stream's request is authenticated, then its token revoked before the generation
    starts: the stream answers 200 and ends at its first event with the 401 error, and the
    pool's one worker serves the next request (a stream cut as a disconnect is)."""
    path = path.format(model=lm_model)
    name = "gen" + path.replace("/", "-") + ("-choices" if "n" in body else "")
    token = quiet_service.create_token(name, PROJECT)
    payload = json.dumps({"model": lm_model, **body} if path.startswith("/v1") else body).encode()
    sock = _past_authentication(quiet_service, path, token, payload)
    _revoke_with_the_cli(quiet_service, name)
    wait_until(lambda: _refused(quiet_service, path, token), 60, "the revocation to be seen")
    events = _events_after(sock, payload)
    error = json.loads(events[-2 if path.startswith("/v1") else -1].removeprefix("data: "))
    message = error["error"] if path.startswith("/v2") else error["error"]["message"]
    assert message == "invalid or revoked token", events
    if path.startswith("/v1"):
        assert error["error"]["type"] == "authentication_error" and events[-1] == "data: [DONE]"
    assert "finish_reason" not in "".join(events).replace('"finish_reason":null', ""), events
    with quiet_service.client(quiet_service.admin_token) as admin:
        served = admin.post("/v1/completions", json={"model": lm_model, "prompt": "a", **LONG})
    assert served.status_code == 200 and served.json()["choices"][0]["finish_reason"], served.text


def test_a_generation_not_streamed_is_401_when_its_token_is_revoked(
    quiet_service: ServiceProcess, lm_model: str
) -> None:
    """The same, not streamed: the answer is the 401 (OpenAI's shape), not the text."""
    token = quiet_service.create_token("gen-whole", PROJECT)
    body = json.dumps({"model": lm_model, "prompt": "The quick brown fox", **LONG}).encode()
    sock = _past_authentication(quiet_service, "/v1/completions", token, body)
    _revoke_with_the_cli(quiet_service, "gen-whole")
    wait_until(lambda: _refused(quiet_service, "/v1/completions", token), 60, "the revocation")
    with sock:
        sock.sendall(body)
        answer = http.client.HTTPResponse(sock, method="POST")
        answer.begin()
        error = json.loads(answer.read())["error"]
    assert answer.status == 401 and error["type"] == "authentication_error", error


def test_a_responses_stream_ends_with_an_error_event_when_its_token_is_revoked(
    quiet_service: ServiceProcess, lm_model: str
) -> None:
    """``/v1/responses`` streamed: the response started, then its last event is the Responses
    API's ``error`` event, never a ``response.completed``."""
    token = quiet_service.create_token("gen-responses", PROJECT)
    body = {"model": lm_model, "input": "Hi", "stream": True, "max_output_tokens": 1000}
    payload = json.dumps(body).encode()
    sock = _past_authentication(quiet_service, "/v1/responses", token, payload)
    _revoke_with_the_cli(quiet_service, "gen-responses")
    wait_until(lambda: _refused(quiet_service, "/v1/responses", token), 60, "the revocation")
    events = [json.loads(line.removeprefix("data: ")) for line in _events_after(sock, payload)]
    assert events[0]["type"] == "response.created"
    assert (events[-1]["type"], events[-1]["message"]) == ("error", "invalid or revoked token")
    assert "response.completed" not in {event["type"] for event in events}
