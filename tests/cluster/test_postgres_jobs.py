"""Job coordination across processes on PostgreSQL: an API replica (``serve --no-workers``,
which runs no compile worker) queues, worker nodes (``pteforge worker``) are woken and
interrupted by notifications, the job of a worker killed with its whole process tree is
retried with the reason and attempt recorded, and a worker node stops its workers and exits
cleanly on SIGTERM."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.nodes import ApiNode, WorkerNode, children_running, create_token, ready_api
from tests.cluster.verify import events_of
from tests.models import hf_encoder_decoder_programs, save_programs
from tests.server.helpers import submit, upload_methods, wait_job, wait_status
from tests.server.service import wait_until

pytestmark = pytest.mark.postgres
# Heartbeats so rare that only a notification can stop a canceled job within the deadline.
SLOW_BEATS = {"PTEFORGE_HEARTBEAT_SECONDS": "30", "PTEFORGE_JOB_LEASE_SECONDS": "120"}


@pytest.fixture(scope="module")
def api(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiNode]:
    env = {"PTEFORGE_DATABASE_URL": postgres_url, "PTEFORGE_RUNTIME_POOL_SIZE": "1"}
    with ready_api("api", tmp_path_factory.mktemp("pg-api"), env) as node:
        yield node


@pytest.fixture(scope="module")
def client(api: ApiNode) -> Iterator[httpx.Client]:
    with api.client(create_token(api.env, api.home)) as opened:
        yield opened


@pytest.fixture(scope="module")
def program(client: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A 2-layer T5 encoder/decoder: lowering it takes long enough to interrupt."""
    model = hf_encoder_decoder_programs(layers=2)
    files = save_programs(model.programs, tmp_path_factory.mktemp("t5"))
    return upload_methods(client, files, name="t5")


def _worker(api: ApiNode, name: str, env: dict[str, str] | None = None) -> WorkerNode:
    node = WorkerNode(name, api.home, {**api.env, **(env or {})}, count=1)
    node.start()
    return node


def _stops_on_sigterm(node: WorkerNode) -> None:
    """SIGTERM ``node``: it stops its workers, then exits with status 0."""
    pids = wait_until(node.worker_pids, 30, f"{node.name}'s workers")
    assert node.proc is not None
    node.proc.terminate()
    assert node.proc.wait(timeout=60) == 0, node.log_tail()
    wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in pids), 30, "their exit")


def _lowering(client: httpx.Client, job_id: str) -> Any:
    """Wait until the job's lowering child runs (a stage past loading the program)."""

    def lowering() -> Any:
        job = wait_status(client, job_id, "running")
        return job if job["stage"] not in (None, "loading") else None

    return wait_until(lowering, 180, f"job {job_id} to lower", every=0.1)


def test_an_api_replica_runs_no_compile_worker(api: ApiNode) -> None:
    assert api.proc is not None
    assert children_running(api.proc.pid, b"pteforge.server.jobs.worker") == []


def test_a_cancel_notification_stops_the_lowering_on_another_node(
    api: ApiNode, client: httpx.Client, program: Any
) -> None:
    worker = _worker(api, "slow-beats", SLOW_BEATS)
    try:
        job = submit(client, program["id"], {"all": {"partitioners": ["xnnpack"]}})
        _lowering(client, job["id"])
        assert client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 200
        done = wait_job(client, job["id"], timeout=20)  # well before the next heartbeat
        assert done["status"] == "canceled" and done["artifact_id"] is None, done
    finally:
        worker.stop()


def test_the_job_of_a_killed_worker_tree_is_retried_with_its_reason(
    api: ApiNode, client: httpx.Client, program: Any
) -> None:
    first = _worker(api, "doomed")
    job = submit(client, program["id"], {"methods": {"decode": {"partitioners": ["xnnpack"]}}})
    wait_status(client, job["id"], "running", timeout=180)
    first.kill_tree()  # kill -9 of the node and its workers and lowering processes
    second = _worker(api, "rescuer")
    try:
        done = wait_job(client, job["id"], timeout=600)  # a hang: 240 s passed at load 17
        _stops_on_sigterm(second)  # a node that just compiled a job stops cleanly
    finally:
        second.stop()
    assert done["status"] == "succeeded" and done["attempt"] == 2, done
    assert "attempt 1 of 3 abandoned" in done["retry_reason"]
    assert "stopped heartbeating" in done["retry_reason"]
    events = events_of(client, job["id"])
    attempts = [(e["status"], e["attempt"]) for e in events if e["stage"] is None]
    assert attempts == [("queued", 0), ("running", 1), ("queued", 1), ("running", 2)], events
    starts = {e["attempt"]: e["started_at"] for e in events if e["status"] == "running"}
    assert starts[2] == done["started_at"] != starts[1]
    assert events[-1]["status"] == "succeeded" and events[-1]["attempt"] == 2


IDENTIFIER = re.compile(r"(proj|tok|job|prog|art|upl)_[0-9a-f]{32}")


def test_metrics_describe_jobs_and_stores_without_identifiers(
    api: ApiNode, client: httpx.Client, program: Any
) -> None:
    """Runs after the tests above: one job canceled, one succeeded on its second attempt."""
    expected = (
        'pteforge_jobs{status="succeeded"} 1.0',
        'pteforge_jobs{status="canceled"} 1.0',
        "pteforge_job_queue_depth 0.0",
        'pteforge_job_stage_seconds_gcount{outcome="retried",stage="claimed"}',
        'pteforge_job_stage_seconds_gcount{outcome="succeeded",stage="store"} 1.0',
        'pteforge_store_rows{kind="programs"} 1.0',
        'pteforge_store_bytes{kind="programs"}',
        "pteforge_workers ",
    )

    def scraped() -> str | None:
        text = httpx.get(f"{api.url}/metrics", timeout=10).text
        return text if all(line in text for line in expected) else None

    text = wait_until(scraped, 30, "the operations metrics")
    assert IDENTIFIER.search(text) is None, IDENTIFIER.search(text)
