"""Scale-out benchmark on one PostgreSQL: worker nodes, API replicas, HAProxy, /v1 latency.

1. Compile-job throughput (tiny programs, portable plan) with 1, then 2 worker processes
   (``pteforge worker``) behind an API replica (``serve --no-workers``).
2. Job pickup latency: from queuing on the API replica to the claim by an idle worker in
   another process (database timestamps), woken by PostgreSQL NOTIFY (target p50 < 100 ms).
3. /v2 infer throughput at 16 clients straight to the replica and through HAProxy
   (``docker/haproxy.cfg``) as a ratio (target >= 0.9).
4. /v1 read latency at 16 clients (target p99 <= 100 ms), next to /v2/health/ready.

Run: ``bash tests/run-with-postgres.sh nice .venv/bin/python bench/scale.py``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.haproxy import LoadBalancer
from tests.cluster.nodes import ApiNode, WorkerNode, create_token
from tests.cluster.programs import INPUT, tiny_program_file
from tests.server.helpers import submit, upload_methods, wait_job

_LENGTH = re.compile(rb"(?i)\r\ncontent-length: *(\d+)")


class KeepAlive:
    """One keep-alive HTTP/1.1 connection sending one pre-encoded request (raw socket, so
    the client spends little of the CPU it shares with the servers)."""

    def __init__(self, port: int, request: bytes) -> None:
        self.request = request
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def call(self) -> bool:
        self.sock.sendall(self.request)
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self.buffer += self._recv()
        match = _LENGTH.search(self.buffer, 0, end)
        total = end + 4 + (int(match.group(1)) if match else 0)
        while len(self.buffer) < total:
            self.buffer += self._recv()
        ok = self.buffer.startswith(b"HTTP/1.1 200 ")
        self.buffer = self.buffer[total:]
        return ok

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        return chunk


def http_request(method: str, path: str, token: str, body: bytes = b"") -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: bench", f"Authorization: Bearer {token}",
            f"Content-Length: {len(body)}", "Content-Type: application/json"]  # fmt: skip
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def hammer(port: int, request: bytes, clients: int, seconds: float) -> tuple[float, list[float]]:
    """Requests per second and latencies (ms) of ``clients`` keep-alive connections."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0]
    barrier = threading.Barrier(clients + 1)

    def run(mine: list[float]) -> None:
        conn = KeepAlive(port, request)
        conn.call()  # connected and warm before the window
        barrier.wait()
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            start = time.perf_counter()
            errors[0] += not conn.call()
            mine.append((time.perf_counter() - start) * 1e3)

    threads = [threading.Thread(target=run, args=(m,)) for m in latencies]
    for thread in threads:
        thread.start()
    barrier.wait()
    for thread in threads:
        thread.join()
    assert errors[0] == 0, f"{errors[0]} requests failed"
    samples = [x for m in latencies for x in m]
    return len(samples) / seconds, samples


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def compile_rate(api: ApiNode, token: str, workers: int, jobs: int, work: Path) -> float:
    """Jobs per minute with ``workers`` worker processes, from the first queue to the last
    finish; fresh programs, so every job lowers."""
    node = WorkerNode(f"bench-w{workers}", api.home, api.env, count=workers)
    node.start()
    try:
        with api.client(token, timeout=600) as client:
            wait_job(
                client, submit(client, _program(client, work, 10_000 + workers), {"all": {}})["id"]
            )
            ids = [_queue(client, work, 100 * workers + i) for i in range(jobs)]
            done = [wait_job(client, job, timeout=1800) for job in ids]
    finally:
        node.stop()
    assert {d["status"] for d in done} == {"succeeded"}, done
    span = max(_ts(d["finished_at"]) for d in done) - min(_ts(d["created_at"]) for d in done)
    return jobs / span.total_seconds() * 60


def _program(client: httpx.Client, work: Path, seed: int) -> str:
    program_id: str = upload_methods(client, {"forward": tiny_program_file(work, seed)})["id"]
    return program_id


def _queue(client: httpx.Client, work: Path, seed: int) -> str:
    job_id: str = submit(client, _program(client, work, seed), {"all": {}})["id"]
    return job_id


def pickup_latencies(api: ApiNode, token: str, samples: int, work: Path) -> list[float]:
    """Queue-to-claim times (ms) of jobs queued while the worker idles; each repeats a
    compiled program and plan, so it ends at once (the artifact is reused)."""
    node = WorkerNode("bench-pickup", api.home, api.env, count=1)
    node.start()
    latencies = []
    try:
        with api.client(token, timeout=600) as client:
            program = _program(client, work, 7)
            wait_job(client, submit(client, program, {"all": {}})["id"], timeout=1800)
            for _ in range(samples):
                time.sleep(0.3)  # the worker is back to waiting for a wake-up
                done = wait_job(client, submit(client, program, {"all": {}})["id"])
                pickup = _ts(done["started_at"]) - _ts(done["created_at"])
                latencies.append(pickup.total_seconds() * 1e3)
    finally:
        node.stop()
    return latencies


def v2_ratio(
    api: ApiNode, lb: LoadBalancer, token: str, work: Path, args: Any
) -> tuple[float, float]:
    """/v2 infer req/s at ``args.clients`` direct to the replica and through HAProxy."""
    node = WorkerNode("bench-v2", api.home, api.env, count=1)
    node.start()
    try:
        with api.client(token, timeout=600) as client:
            done = wait_job(client, submit(client, _program(client, work, 9), {"all": {}})["id"])
            model = f"{done['artifact_id']}.forward"
            name = client.get(f"/v2/models/{model}").json()["inputs"][0]["name"]
    finally:
        node.stop()
    tensor = {"name": name, "shape": [1, 16], "datatype": "FP32", "data": INPUT.ravel().tolist()}
    request = http_request("POST", f"/v2/models/{model}/infer", token,
                           json.dumps({"inputs": [tensor]}).encode())  # fmt: skip
    direct, through = [], []
    for _ in range(args.rounds):  # interleaved, so both see the same machine
        direct.append(hammer(api.port, request, args.clients, args.seconds)[0])
        through.append(hammer(lb.port, request, args.clients, args.seconds)[0])
    return statistics.median(direct), statistics.median(through)


def v1_latency(api: ApiNode, token: str, args: Any) -> list[tuple[str, float, float, float]]:
    """(path, req/s, p50 ms, p99 ms) at ``args.clients`` for /v1 reads and a /v2 baseline."""
    with api.client(token) as client:
        job = client.get("/v1/jobs", params={"limit": 1}).json()["jobs"][0]["id"]
    rows = []
    for path in ("/v2/health/ready", "/v1/backends", f"/v1/jobs/{job}", "/v1/jobs?limit=20"):
        rate, samples = hammer(
            api.port, http_request("GET", path, token), args.clients, args.seconds
        )
        shown = re.sub(r"job_[0-9a-f]+", "{id}", path)
        rows.append(
            (shown, rate, float(np.percentile(samples, 50)), float(np.percentile(samples, 99)))
        )
    return rows


def main() -> int:
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=8, help="compile jobs per worker count")
    parser.add_argument("--pickups", type=int, default=20)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    url = os.environ.get("PTEFORGE_TEST_POSTGRES_URL")
    if not url:
        raise SystemExit("run through tests/run-with-postgres.sh (PostgreSQL is needed)")
    with tempfile.TemporaryDirectory(prefix="pteforge-scale-") as tmp:
        run(Path(tmp), url, args)
    return 0


def run(work: Path, url: str, args: Any) -> None:
    env = {"PTEFORGE_DATABASE_URL": url, "PTEFORGE_COMPILE_WARMUP": "false"}
    api = ApiNode("bench-api", work / "home", env)
    api.start()
    lb = LoadBalancer([api.port], work)
    try:
        api.wait_ready()
        lb.start()
        token = create_token(api.env, api.home)
        report(api, lb, token, work, args)
    finally:
        lb.stop()
        api.stop()


def report(api: ApiNode, lb: LoadBalancer, token: str, work: Path, args: Any) -> None:
    rates = {n: compile_rate(api, token, n, args.jobs, work) for n in (1, 2)}
    pickups = pickup_latencies(api, token, args.pickups, work)
    direct, through = v2_ratio(api, lb, token, work, args)
    latency = v1_latency(api, token, args)
    print("\n| measure | value | target |\n|---|---|---|")
    print(f"| compile jobs/min, 1 worker process | {rates[1]:.1f} | |")
    print(
        f"| compile jobs/min, 2 worker processes | {rates[2]:.1f} (x{rates[2] / rates[1]:.2f}) | |"
    )
    print(f"| job pickup ms, p50 / p90 / max ({len(pickups)} jobs) | "
          f"{np.percentile(pickups, 50):.0f} / {np.percentile(pickups, 90):.0f} / "
          f"{max(pickups):.0f} | p50 < 100 |")  # fmt: skip
    print(f"| /v2 infer req/s at {args.clients} clients: direct, via HAProxy | {direct:.0f}, "
          f"{through:.0f} (ratio {through / direct:.2f}) | ratio >= 0.9 |")  # fmt: skip
    for path, rate, p50, p99 in latency:
        print(f"| GET {path} at {args.clients} clients: req/s, p50, p99 ms | {rate:.0f}, "
              f"{p50:.1f}, {p99:.1f} | p99 <= 100 |")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
