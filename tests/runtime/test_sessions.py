"""Sessions over the sequence extension, as ``tritonclient.http`` sends them, on /v2.

A counter compiled with its buffer named and shared (``n += 1; return x + n``) makes the
state visible: inside a session it counts, outside it always answers 1. The real
workloads (a KV-cached LM, a Whisper-style model) run through the whole service in
``tests/server/test_sessions.py``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from pteforge.runtime import RuntimePool
from pteforge.runtime.errors import SessionLimitError, SessionMemoryError, UnknownSessionError
from pteforge.runtime.sessions import GenerationSession, Sequence, SessionLimits, Sessions
from pteforge.runtime.state import read_program_state
from tests.runtime.helpers import MemoryResolver, build_app, serve
from tests.runtime.stateful_compile import StatefulPte, compile_stateful
from tests.runtime.stateful_models import counter_programs

PER_PROJECT = 2


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> StatefulPte:
    root = tmp_path_factory.mktemp("session-counter")
    return compile_stateful(counter_programs(), root / "counter.pte", xnnpack=False)


class Clock:
    """A clock the test moves by hand (the registry's idle times are read from it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Site:
    def __init__(self, url: str, pool: RuntimePool, clock: Clock) -> None:
        self.url, self.pool, self.clock = url, pool, clock

    def client(self, token: str = "tok-a") -> triton.InferenceServerClient:
        headers = {"Authorization": f"Bearer {token}"}
        return _Authed(self.url.removeprefix("http://"), headers)


class _Authed(triton.InferenceServerClient):  # type: ignore[misc]
    """A tritonclient that sends the bearer token with every request."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        super().__init__(url)
        self.auth = headers

    def infer(self, *args: Any, **kwargs: Any) -> Any:
        return super().infer(*args, headers=self.auth, **kwargs)


@pytest.fixture
def site(counter: StatefulPte, tmp_path: Path) -> Iterator[Site]:
    """A two-worker pool whose sessions allow ``PER_PROJECT`` per project and memory for
    three counters, behind the /v2 router; its session clock is the test's."""
    state = read_program_state(counter.path)
    assert state is not None and state.method("forward").resettable
    limits = SessionLimits(idle_s=60, per_scope=PER_PROJECT, total_bytes=3 * state.planned_bytes)
    with RuntimePool(2, 1 << 26, tmp_path, session_limits=limits) as pool:
        clock = Clock()
        pool.sessions.clock = clock
        resolver = MemoryResolver()
        resolver.add("project-a", "counter", counter, as_path=True)  # type: ignore[arg-type]
        resolver.add("project-b", "counter", counter, as_path=True)  # type: ignore[arg-type]
        app, _ = build_app(resolver, pool)
        with serve(app) as url:
            yield Site(url, pool, clock)


def step(client: triton.InferenceServerClient, sequence: Any = 0, **flags: bool) -> float:
    """One call of the counter (x = 0) in ``sequence`` (0: stateless); the answer."""
    entry = triton.InferInput("input_0", [1], "FP32")
    entry.set_data_from_numpy(np.zeros(1, np.float32))
    reply = client.infer(
        "counter.forward",
        [entry],
        sequence_id=sequence,
        sequence_start=flags.get("start", False),
        sequence_end=flags.get("end", False),
    )
    return float(reply.as_numpy("output_0")[0])


def refused(call: Any, status: int) -> str:
    """Run ``call``; it must fail with ``status``. Its message."""
    with pytest.raises(InferenceServerException) as info:
        call()
    assert info.value.status() == str(status), info.value.message()
    return str(info.value.message())


def test_a_session_keeps_state_from_start_to_end(site: Site) -> None:
    client = site.client()
    assert step(client, 7, start=True) == 1.0
    assert [step(client, 7) for _ in range(3)] == [2.0, 3.0, 4.0]
    metrics = httpx.get(f"{site.url}/metrics").text
    assert "pteforge_runtime_sessions 1.0" in metrics
    assert "sequence" in client.get_server_metadata(headers=client.auth)["extensions"]
    assert step(client, 0) == 1.0  # a stateless call in between neither sees nor moves it
    assert step(client, 7, end=True) == 5.0
    message = refused(lambda: step(client, 7), 410)
    assert "sequence 7 was ended by sequence_end" in message
    assert step(client, 7, start=True) == 1.0  # the same id starts afresh
    assert step(client, 7, start=True) == 1.0  # and a new start on an active id restarts it


def test_sequence_ids_are_scoped_to_the_project_and_may_be_strings(site: Site) -> None:
    a, b = site.client("tok-a"), site.client("tok-b")
    assert step(a, "chat-1", start=True) == 1.0
    assert step(b, "chat-1", start=True) == 1.0
    assert step(a, "chat-1") == 2.0
    assert step(a, "chat-1") == 3.0
    assert step(b, "chat-1") == 2.0
    message = refused(lambda: step(b, 99), 400)
    assert "sequence 99 is not active: start it with sequence_start" in message


def test_limits_refuse_new_sessions_and_say_which(site: Site) -> None:
    a, b = site.client("tok-a"), site.client("tok-b")
    for sequence in range(1, PER_PROJECT + 1):
        step(a, sequence, start=True)
    message = refused(lambda: step(a, 50, start=True), 429)
    assert "limit per project (2)" in message and "sequence 50" in message
    step(b, 1, start=True)  # another project still may: memory for three
    message = refused(lambda: step(b, 2, start=True), 503)
    assert "session memory limit" in message and "MiB" in message
    assert "method 'forward' plans" in message  # what needs the memory, and how to need less
    step(a, 1, end=True)  # ending one frees its place
    assert step(b, 2, start=True) == 1.0


def test_an_idle_session_expires_and_says_so(site: Site) -> None:
    client = site.client()
    assert step(client, 3, start=True) == 1.0
    site.clock.now += 61
    site.pool.sweep()
    assert len(site.pool.sessions) == 0
    message = refused(lambda: step(client, 3), 410)
    assert "sequence 3 expired after 61s idle" in message


def test_a_worker_crash_ends_its_sessions_never_a_silent_restart(site: Site) -> None:
    client = site.client()
    assert step(client, 11, start=True) == 1.0
    assert step(client, 11) == 2.0
    (session,) = list(site.pool.sessions._active.values())
    os.kill(session.worker.process.pid, signal.SIGKILL)
    session.worker.process.join(5)
    message = refused(lambda: step(client, 11), 410)
    assert "sequence 11 ended" in message and "exit code -9" in message
    assert "state is lost" in message
    assert step(client, 0) == 1.0  # stateless requests go on, on the other worker
    assert step(client, 11, start=True) == 1.0


def test_bad_sequence_parameters_are_400(site: Site) -> None:
    body: dict[str, Any] = {
        "inputs": [{"name": "input_0", "datatype": "FP32", "shape": [1], "data": [0.0]}]
    }
    url = f"{site.url}/v2/models/counter.forward/infer"
    headers = {"Authorization": "Bearer tok-a"}
    for parameters, words in [
        ({"sequence_id": 1.5}, "sequence_id must be an integer or a string"),
        ({"sequence_id": 1, "sequence_start": "yes"}, "'sequence_start' must be true or false"),
        ({"sequence_start": True}, "need a sequence_id"),
        ({"sequence_id": 4, "sequence_start": True, "profile": True}, "profile is not available"),
    ]:
        reply = httpx.post(url, json=dict(body, parameters=parameters), headers=headers)
        assert reply.status_code == 400 and words in reply.json()["error"], reply.text


def test_a_generation_session_is_apart_from_v2_sequence_ids() -> None:
    """A generation session keyed 'chat' was the /v2 sequence 'generate:chat' of its project:
    an infer step naming that id joined it and ran on the generation's KV cache."""
    sessions = Sessions(SessionLimits(per_scope=2))
    sessions.begin(GenerationSession("project-a", "chat"), "sha", 1)
    with pytest.raises(UnknownSessionError, match="sequence 'generate:chat' is not active"):
        sessions.find(Sequence("project-a", "generate:chat"), "sha")


def test_a_project_over_its_sessions_is_told_how_its_kind_ends() -> None:
    """Session keys from one project (each a new session): past the limit, a 429 naming the
    generation session and how one ends (no sequence_end there); other projects open theirs."""
    sessions = Sessions(SessionLimits(per_scope=2))
    for key in ("k1", "k2"):
        sessions.begin(GenerationSession("project-a", key), "sha", 1)
    with pytest.raises(SessionLimitError) as refused:
        sessions.begin(GenerationSession("project-a", "k3"), "sha", 1)
    message = str(refused.value)
    assert "cannot start generation session 'k3'" in message, message
    assert "limit per project (2); let one expire" in message, message
    sessions.begin(GenerationSession("project-b", "k1"), "sha", 1)


def test_one_project_cannot_take_the_whole_session_memory() -> None:
    """Past its share of the session memory a project gets a 429-kind refusal naming the
    share and how to free some; another project still opens sessions, up to the total."""
    sessions = Sessions(SessionLimits(per_scope=8, total_bytes=4 << 20, per_scope_bytes=2 << 20))
    sessions.begin(GenerationSession("project-a", "k1"), "sha", 1 << 20)
    sessions.begin(GenerationSession("project-a", "k2"), "sha", 1 << 20)
    with pytest.raises(SessionLimitError) as refused:
        sessions.begin(GenerationSession("project-a", "k3"), "sha", 1 << 20, why="it plans 1 MiB")
    message = str(refused.value)
    assert "this project's open sessions hold 2.0 MiB of the 2.0 MiB one project" in message
    assert "PTEFORGE_SESSION_MEMORY_BYTES_PER_PROJECT" in message and "it plans 1 MiB" in message
    sessions.begin(GenerationSession("project-b", "k1"), "sha", 2 << 20)
    with pytest.raises(SessionMemoryError, match="server-wide session memory limit"):
        sessions.begin(GenerationSession("project-c", "k1"), "sha", 1)
