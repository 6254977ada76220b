"""What the fault test checks once the load is over: jobs ended once, artifacts intact."""

from __future__ import annotations

import hashlib
import json
from itertools import pairwise
from typing import Any

import httpx
import numpy as np
import psycopg
from sqlalchemy.engine import make_url

from tests.cluster.load import RetryingClient
from tests.cluster.nodes import WorkerNode
from tests.cluster.programs import INPUT, eager_output


def running_on(postgres_url: str, node: WorkerNode) -> str | None:
    """The id of a job one of ``node``'s workers runs now, if any (read from the database:
    the API does not say which worker runs a job)."""
    pids = {str(pid) for pid in node.worker_pids()}
    conninfo = make_url(postgres_url).set(drivername="postgresql")
    with psycopg.connect(conninfo.render_as_string(hide_password=False)) as conn:
        rows = conn.execute("SELECT id, worker_id FROM jobs WHERE status = 'running'").fetchall()
    return next((job for job, worker in rows if worker.split(":")[1] in pids), None)


def events_of(client: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    """The ``job`` events of a finished job's stream, in order."""
    response = client.get(f"/v1/jobs/{job_id}/events")
    assert response.status_code == 200, response.text
    text = response.text
    return [
        json.loads(line.removeprefix("data: "))
        for block in text.split("\n\n")
        if block.startswith("id: ")
        for line in block.splitlines()
        if line.startswith("data: ")
    ]


def check_run_once(events: list[dict[str, Any]]) -> None:
    """One terminal event, last; each attempt starts (one more) only from the queue, after
    the one before went back to it (no two attempts ran at once); going back to the queue
    takes one off only when a stopped worker handed the job back (an attempt not counted)."""
    terminal = [e for e in events if e["status"] in {"succeeded", "failed", "canceled"}]
    assert terminal == [events[-1]] and terminal[0]["status"] == "succeeded", events
    for before, after in pairwise(events):
        step = after["attempt"] - before["attempt"]
        if step > 0:
            assert (before["status"], after["status"], step) == ("queued", "running", 1), events
        elif step < 0:
            assert (after["status"], step) == ("queued", -1), events
            assert "handed back" in (after["retry_reason"] or ""), events


def check_jobs(client: RetryingClient, jobs: dict[str, dict[str, Any]], killed: str) -> None:
    """Every job of the project succeeded exactly once; the killed job was retried unless
    it had finished just before the kill."""
    listed = client.call("GET", "/v1/jobs", params={"limit": 1000}).json()["jobs"]
    assert {j["status"] for j in listed} == {"succeeded"}, listed
    assert set(jobs) <= {j["id"] for j in listed}
    for job in listed:
        check_run_once(events_of(client.http, job["id"]))
    retried = [j for j in listed if j["attempt"] > 1]
    assert all("abandoned" in (j["retry_reason"] or "") for j in retried), retried
    assert killed in {j["id"] for j in retried} or jobs[killed]["attempt"] == 1


def check_artifacts(client: RetryingClient, jobs: dict[str, dict[str, Any]]) -> None:
    """Each job's artifact is distinct, matches its sha256 and computes what eager does."""
    artifacts = {job["artifact_id"] for job in jobs.values()}
    assert len(artifacts) == len(jobs)
    for job in jobs.values():
        meta = client.call("GET", f"/v1/artifacts/{job['artifact_id']}").json()
        pte = client.call("GET", f"/v1/artifacts/{job['artifact_id']}/pte").content
        assert hashlib.sha256(pte).hexdigest() == meta["sha256"]
        model = f"{job['artifact_id']}.forward"
        name = client.call("GET", f"/v2/models/{model}").json()["inputs"][0]["name"]
        out, _ = client.infer(model, name, INPUT.numpy())
        np.testing.assert_allclose(out, eager_output(job["seed"]).numpy(), atol=1e-5, rtol=1e-4)
