"""HTTP helpers shared by the service tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx
from starlette.routing import BaseRoute

from tests.server.service import wait_until

T = TypeVar("T")

TERMINAL = {"succeeded", "failed", "canceled"}
MIXED_PLAN = {"methods": {"encode": {"partitioners": ["xnnpack"]}, "decode": {}}}
SHARED_PLAN = {"all": {"partitioners": ["xnnpack"]}, "share_mutable_buffers": True}
"""XNNPACK, the methods sharing their mutable buffers: how a stateful program is served."""


def upload_methods(client: httpx.Client, files: Mapping[str, Path], name: str = "m") -> Any:
    parts = {method: (path.name, path.read_bytes()) for method, path in files.items()}
    response = client.post("/v1/programs", files=parts, data={"name": name})
    assert response.status_code == 201, response.text
    return response.json()


def submit(client: httpx.Client, program_id: str, plan: Mapping[str, Any]) -> Any:
    response = client.post("/v1/compile-jobs", json={"program_id": program_id, "plan": plan})
    assert response.status_code == 202, response.text
    return response.json()


def compile_files(
    client: httpx.Client, files: Mapping[str, Path], name: str, plan: Mapping[str, Any]
) -> str:
    """Upload ``files`` (one part per method) and compile them with ``plan``; the artifact id."""
    program = upload_methods(client, files, name=name)
    done = wait_job(client, submit(client, program["id"], plan)["id"], timeout=600)
    assert done["status"] == "succeeded", done
    return str(done["artifact_id"])


def job_state(client: httpx.Client, job_id: str) -> Any:
    response = client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return response.json()


def wait_job(client: httpx.Client, job_id: str, timeout: float = 240.0) -> Any:
    def finished() -> Any:
        job = job_state(client, job_id)
        return job if job["status"] in TERMINAL else None

    return wait_until(finished, timeout, f"job {job_id} to finish", every=0.2)


def wait_status(client: httpx.Client, job_id: str, status: str, timeout: float = 120.0) -> Any:
    def reached() -> Any:
        job = job_state(client, job_id)
        assert job["status"] == status or job["status"] not in TERMINAL, job
        return job if job["status"] == status else None

    return wait_until(reached, timeout, f"job {job_id} to be {status}", every=0.1)


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body


def read_events(client: httpx.Client, job_id: str) -> list[tuple[str, Any]]:
    """``(event, data)`` of each SSE message of the job's stream until it closes."""
    return [(m["event"], m["data"]) for m in read_stream(client, job_id)]


def read_stream(
    client: httpx.Client, job_id: str, headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The SSE messages of the job's stream until it closes: ``event``, ``data``, ``id``."""
    messages: list[dict[str, Any]] = []
    message: dict[str, Any] = {"id": None}
    with client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("id: "):
                message["id"] = line.removeprefix("id: ")
            elif line.startswith("event: "):
                message["event"] = line.removeprefix("event: ")
            elif line.startswith("data: "):
                message["data"] = json.loads(line.removeprefix("data: "))
                messages.append(message)
                message = {"id": None}
    return messages


def memory_kib(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` memory figure (``VmRSS``, ``VmHWM``), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field}")


def peak_growth_kib(pid: int, action: Callable[[], T]) -> tuple[T, int]:
    """``action``'s answer, and how far ``pid``'s peak resident memory rose above its resident
    memory while it ran (the peak is reset through ``clear_refs`` first)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = memory_kib(pid, "VmRSS")
    answer = action()
    return answer, memory_kib(pid, "VmHWM") - before


def app_routes(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, those of included routers too (FastAPI keeps those in their router)."""
    for route in routes:
        router = getattr(route, "original_router", None)
        yield from [route] if router is None else app_routes(router.routes)
