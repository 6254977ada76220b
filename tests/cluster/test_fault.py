"""Faults on a loopback deployment: PostgreSQL, 2 API replicas (``serve --no-workers``),
2 worker nodes (``pteforge worker``) and HAProxy configured by ``docker/haproxy.cfg``.

4 clients upload 8 tiny programs, compile each and call ``/v2`` all along, through the load
balancer, until their jobs are done and the restarted replica answers them again. Mid-run one
worker node and the API replica that serves the ``/v2`` artifact are SIGKILLed with their
whole process trees, then restarted. Every job must end exactly once, succeeded; every
artifact must match its sha256 and compute what eager PyTorch does; ``/v2`` calls may fail
only inside the kill window, and every retried call must succeed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.cluster.haproxy import LoadBalancer
from tests.cluster.load import Failures, RetryingClient
from tests.cluster.nodes import ApiNode, Node, WorkerNode, create_token
from tests.cluster.programs import INPUT, eager_output, tiny_program_file
from tests.cluster.verify import check_artifacts, check_jobs, running_on
from tests.server.service import wait_until

pytestmark = pytest.mark.postgres
# The clients' /v2 calls span the kill window whatever their number (each calls until the
# restarted replica answers it), so a few clients with a few jobs each prove what 8 clients
# with 5 jobs did, at a fraction of the cost on 2 cores.
CLIENTS, JOBS_EACH = 4, 2
PROBE_SEED = 1000  # the program whose artifact the /v2 load calls
# The kill window ends this long after the killed replica is ready again: HAProxy takes up
# to `rise` (2) checks of `inter` (1 s) to send it traffic again.
WINDOW_MARGIN_S = 3.0
PACE_S = 0.1  # between the rounds of each client (one /v2 call, one job listing)
LOAD_DEADLINE_S = 900.0  # a hang, not slowness: a replica restart under load took 180 s
TERMINAL = {"succeeded", "failed", "canceled"}


@dataclass
class Cluster:
    apis: list[ApiNode]
    workers: list[WorkerNode]
    lb: LoadBalancer
    token: str
    postgres_url: str


@pytest.fixture(scope="module")
def cluster(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("cluster")
    env = {"PTEFORGE_DATABASE_URL": postgres_url, "PTEFORGE_RUNTIME_POOL_SIZE": "1"}
    migrate = Node("migrate", ["migrate"], home, env)
    migrate.start()
    assert migrate.proc is not None and migrate.proc.wait(timeout=120) == 0, migrate.log_tail()
    apis = [ApiNode(f"api{i}", home, env) for i in range(2)]
    workers = [WorkerNode(f"worker{i}", home, env) for i in range(2)]
    nodes: list[Node] = [*apis, *workers]
    lb = LoadBalancer([api.port for api in apis], home)
    try:
        for node in nodes:
            node.start()
        for api in apis:
            api.wait_ready()
        lb.start()
        yield Cluster(apis, workers, lb, create_token(env, home), postgres_url)
    finally:
        lb.stop()
        for node in nodes:
            node.stop()


def _compile(client: RetryingClient, program: Path) -> dict[str, Any]:
    """Upload and queue one program (portable plan); returns the job."""
    with program.open("rb") as file:
        uploaded = client.call("POST", "/v1/programs", files={"forward": (program.name, file)})
    assert uploaded.status_code == 201, uploaded.text
    body = {"program_id": uploaded.json()["id"], "plan": {"all": {}}}
    queued = client.call("POST", "/v1/compile-jobs", json=body)
    assert queued.status_code == 202, queued.text
    job: dict[str, Any] = queued.json()
    return job


def _finished(client: RetryingClient, job_id: str) -> dict[str, Any] | None:
    job: dict[str, Any] = client.call("GET", f"/v1/jobs/{job_id}").json()
    return job if job["status"] in TERMINAL else None


@dataclass
class Probe:
    """The /v2 model every client calls, its input name and the replica serving it."""

    model: str
    input_name: str
    replica: str


def _probe(cluster: Cluster, client: RetryingClient, directory: Path) -> Probe:
    job = _compile(client, tiny_program_file(directory, PROBE_SEED))
    done = wait_until(lambda: _finished(client, job["id"]), 180, "the probe artifact")
    assert done["status"] == "succeeded", done
    model = f"{done['artifact_id']}.forward"
    meta = client.call("GET", f"/v2/models/{model}").json()
    name = meta["inputs"][0]["name"]
    _, replica = client.infer(model, name, INPUT.numpy())
    return Probe(model, name, replica)


class LoadClient(threading.Thread):
    """Submits its programs' jobs, then calls /v2 until its jobs are done and the killed
    replica, once ``restarted`` is set, has answered one of its calls again."""

    def __init__(
        self,
        client: RetryingClient,
        programs: list[Path],
        probe: Probe,
        restarted: threading.Event,
    ) -> None:
        super().__init__(daemon=True)
        self.client, self.programs, self.probe = client, programs, probe
        self.restarted = restarted
        self.jobs: dict[str, dict[str, Any]] = {}  # job id -> final state
        self.error: BaseException | None = None
        self.infers = 0
        self.rejoined = False  # the restarted replica answered this client

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test thread
            self.error = exc

    def _run(self) -> None:
        pending = {_compile(self.client, p)["id"]: p for p in self.programs}
        expected = eager_output(PROBE_SEED).numpy()
        deadline = time.monotonic() + LOAD_DEADLINE_S
        while (pending or not self.rejoined) and time.monotonic() < deadline:
            after_restart = self.restarted.is_set()  # the killed process is gone by then
            out, replica = self.client.infer(self.probe.model, self.probe.input_name, INPUT.numpy())
            np.testing.assert_allclose(out, expected, atol=1e-5, rtol=1e-4)
            self.infers += 1
            self.rejoined |= after_restart and replica == self.probe.replica
            listed = self.client.call("GET", "/v1/jobs", params={"limit": 1000}).json()["jobs"]
            for job in listed:
                if job["id"] in pending and job["status"] in TERMINAL:
                    self.jobs[job["id"]] = {**job, "seed": int(pending.pop(job["id"]).stem[3:])}
            time.sleep(PACE_S)  # pacing the load, so the compiles keep some CPU
        assert not pending, f"jobs not finished: {sorted(pending)}"
        assert self.rejoined, "the restarted replica never answered"


@dataclass
class Kill:
    """When the nodes were killed, when the replica answered again, the job cut short."""

    at: float
    back: float
    job: str


def _kill_and_restart(cluster: Cluster, replica: str, restarted: threading.Event) -> Kill:
    """SIGKILL worker node 0 while it runs a job and the replica serving the probe, with
    their process trees, then restart both; ``restarted`` is set once the replica is ready."""
    worker, api = cluster.workers[0], cluster.apis[int(replica.removeprefix("api"))]
    job = wait_until(lambda: running_on(cluster.postgres_url, worker), 120, "a job on worker0")
    killed = time.monotonic()
    worker.kill_tree()
    api.kill_tree()
    worker.start()
    api.start()
    api.wait_ready()
    restarted.set()
    return Kill(killed, time.monotonic(), job)


def test_jobs_and_v2_survive_a_killed_worker_and_replica(cluster: Cluster, tmp_path: Path) -> None:
    failures = Failures()
    clients = [RetryingClient(cluster.lb.url, cluster.token, failures) for _ in range(CLIENTS)]
    probe = _probe(cluster, clients[0], tmp_path)
    programs = [tiny_program_file(tmp_path, seed) for seed in range(CLIENTS * JOBS_EACH)]
    restarted = threading.Event()
    loads = [
        LoadClient(c, programs[i * JOBS_EACH : (i + 1) * JOBS_EACH], probe, restarted)
        for i, c in enumerate(clients)
    ]
    for load in loads:
        load.start()
    kill = _kill_and_restart(cluster, probe.replica, restarted)
    for load in loads:
        load.join(timeout=LOAD_DEADLINE_S + 60)
        assert not load.is_alive() and load.error is None, load.error
    end = kill.back + WINDOW_MARGIN_S
    outside = [(t - kill.at, what) for t, what in failures.seen if not kill.at <= t <= end]
    assert outside == [] and failures.gave_up == [], (outside, failures.gave_up)
    assert sum(load.infers for load in loads) > 0
    jobs = {job_id: job for load in loads for job_id, job in load.jobs.items()}
    assert len(jobs) == CLIENTS * JOBS_EACH
    check_jobs(clients[0], jobs, kill.job)
    check_artifacts(clients[0], jobs)
    for client in clients:
        client.close()
