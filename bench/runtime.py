"""Runtime benchmark: /v2 against ExecuTorch in-process and eager PyTorch, in the same run.

For a small MLP and for the encoder of an encoder/decoder model:
- latency p50/p99 of (a) ``executorch.runtime`` in this process, (b) our ``/v2`` infer with
  binary tensors over HTTP (keep-alive, one client), (c) eager PyTorch; all single-threaded
  kernels (the pool's workers run 1 thread each);
- throughput with 1, 4 and 16 concurrent clients through ``/v2`` and, as the baseline,
  the same ``RuntimePool`` called from as many threads in this process.
Targets: (b) - (a) < 1 ms at p50 on the small model; 16 clients: no errors and /v2
throughput >= 90% of the in-process pool's.

Each is measured with a pool of as many workers as cores (the service default) and, as a
second configuration, one worker fewer (leaving a core to the HTTP side); the in-process
baseline always uses a pool of the same size. The throughput table also gives the CPU time
per request of the server process and of the client threads (they share the machine).

Run: ``.venv/bin/python bench/runtime.py [--iterations 500] [--seconds 3] [--workers 2,1]``
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pteforge.runtime import RuntimePool
from pteforge.runtime.protocol import HEADER_LENGTH
from tests.models import TinySeq2Seq, export_methods, small_mlp_programs


@dataclass
class Workload:
    name: str
    path: Path
    sha256: str
    method: str
    inputs: list[np.ndarray]
    eager: Callable[..., Any]


def _compile(models: Any, method: str, path: Path, name: str) -> Workload:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    programs = {method: models.programs[method]}
    data = to_edge_transform_and_lower(programs, partitioner=[XnnpackPartitioner()])
    buffer = data.to_executorch().buffer
    path.write_bytes(buffer)
    inputs = [t.numpy() for t in models.inputs[method]]
    sha = hashlib.sha256(buffer).hexdigest()
    return Workload(name, path, sha, method, inputs, models.eager[method])


def build_workloads(root: Path) -> list[Workload]:
    torch.manual_seed(0)
    seq2seq = TinySeq2Seq(vocab=1000, d_model=256, heads=8)
    tokens = torch.randint(0, 1000, (1, 64))
    encoder = export_methods(seq2seq, {"encode": (tokens,)})
    return [
        _compile(small_mlp_programs(), "forward", root / "mlp.pte", "small MLP"),
        _compile(encoder, "encode", root / "encoder.pte", "seq2seq encoder (d=256, 64 tok)"),
    ]


# -- the server under test (a subprocess) ----------------------------------------------------


def serve(port: int, workers: int, artifacts: dict[str, str], home: Path) -> None:
    """Child mode: the /v2 router over a pool, with an allow-all auth dependency."""
    import uvicorn
    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry

    from pteforge.server.inference import ResolvedArtifact, build_inference_router

    resolved = {
        artifact_id: ResolvedArtifact(
            hashlib.sha256(Path(path).read_bytes()).hexdigest(), Path(path), ("forward", "encode")
        )
        for artifact_id, path in artifacts.items()
    }

    class Resolver:
        def resolve(self, principal: Any, artifact_id: str) -> ResolvedArtifact | None:
            return resolved.get(artifact_id)

    async def allow_all(request: Any) -> str:
        """Like the service's bearer check on a cache hit: no database, no thread hop."""
        return "bench"

    pool = RuntimePool(workers, 1 << 30, home)
    app = FastAPI()
    app.include_router(build_inference_router(Resolver(), pool, allow_all, CollectorRegistry()))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                http="httptools", loop="uvloop")  # fmt: skip


def _binary_body(inputs: list[np.ndarray]) -> tuple[bytes, dict[str, str]]:
    tensors = [
        {"name": f"input_{i}", "datatype": "INT64" if a.dtype == np.int64 else "FP32",
         "shape": list(a.shape), "parameters": {"binary_data_size": a.nbytes}}
        for i, a in enumerate(inputs)
    ]  # fmt: skip
    head = json.dumps({"inputs": tensors, "parameters": {"binary_data_output": True}}).encode()
    body = head + b"".join(np.ascontiguousarray(a).tobytes() for a in inputs)
    headers = {HEADER_LENGTH: str(len(head)), "Content-Type": "application/octet-stream"}
    return body, headers


class V2Client:
    """A keep-alive HTTP/1.1 client posting one pre-encoded binary infer request.

    Raw socket, minimal response parsing (status line, Content-Length): the client shares
    the 2 cores with the server, so it should spend as little CPU as a client can (about
    a third of ``http.client``'s per request); the CPU column reports what it spent.
    """

    def __init__(self, port: int, model: str, inputs: list[np.ndarray]) -> None:
        body, headers = _binary_body(inputs)
        lines = [f"POST /v2/models/{model}/infer HTTP/1.1", "Host: 127.0.0.1",
                 f"Content-Length: {len(body)}"]  # fmt: skip
        lines += [f"{k}: {v}" for k, v in headers.items()]
        self.request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pending = b""

    def _read_until(self, data: bytes, size: int) -> bytes:
        chunks = [data]
        while size > 0:
            chunk = self.sock.recv(max(size, 65536))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def infer(self) -> bool:
        self.sock.sendall(self.request)
        data = self.pending
        while (end := data.find(b"\r\n\r\n")) < 0:
            data = self._read_until(data, 1)
        match = _CONTENT_LENGTH.search(data, 0, end)
        total = end + 4 + (int(match.group(1)) if match else 0)
        data = self._read_until(data, total - len(data))
        self.pending = data[total:]
        return data.startswith(b"HTTP/1.1 200 ")


_CONTENT_LENGTH = re.compile(rb"(?i)\r\ncontent-length: *(\d+)")


def start_server(port: int, workers: int, workloads: list[Workload], home: Path) -> Any:
    spec = json.dumps({w.path.stem: str(w.path) for w in workloads})
    command = [sys.executable, __file__, "--serve", str(port), "--serve-workers", str(workers),
               "--artifacts", spec, "--home", str(home)]  # fmt: skip
    process = subprocess.Popen(command)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/v2/health/ready")
            if conn.getresponse().status == 200:
                return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the /v2 server did not start")


# -- measurements -----------------------------------------------------------------------------


def latencies(call: Callable[[], Any], iterations: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def pct(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (its own threads, not children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Rate:
    """Throughput of one run, with the CPU the client and the server process spent on it."""

    per_second: float
    errors: int
    client_cpu_us: float  # per request, this process (the client threads)
    server_cpu_us: float  # per request, the server process (HTTP + dispatch; not the workers)


def measured(
    make_call: Callable[[], Callable[[], bool]],
    clients: int,
    seconds: float,
    server_pid: int | None,
) -> Rate:
    """``throughput`` with the CPU spent by this process and by ``server_pid`` meanwhile."""
    client, server = time.process_time(), cpu_seconds(server_pid) if server_pid else 0.0
    rate, errors, elapsed = throughput(make_call, clients, seconds)
    requests = max(rate * elapsed, 1.0)
    client_us = (time.process_time() - client) / requests * 1e6
    server_us = (cpu_seconds(server_pid) - server) / requests * 1e6 if server_pid else 0.0
    return Rate(rate, errors, client_us, server_us)


def throughput(make_call: Callable[[], Callable[[], bool]], clients: int, seconds: float
               ) -> tuple[float, int, float]:  # fmt: skip
    """Requests per second, error count and elapsed seconds of ``clients`` threads calling
    for ``seconds``."""
    counts, errors = [0] * clients, [0] * clients
    stop = time.monotonic() + seconds
    barrier = threading.Barrier(clients + 1)

    def run(i: int) -> None:
        call = make_call()
        call()  # connect and warm up outside the window
        barrier.wait()
        while time.monotonic() < stop:
            try:
                ok = call()
            except Exception:
                ok = False
            counts[i] += ok
            errors[i] += not ok

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.monotonic()
    stop = start + seconds
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    return sum(counts) / elapsed, sum(errors), elapsed


def in_process_method(workload: Workload) -> Callable[[], Any]:
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    runtime._legacy_module._unsafe_reset_threadpool(1)
    method = runtime.load_program(workload.path).load_method(workload.method)
    tensors = [torch.from_numpy(a) for a in workload.inputs]
    return lambda: method.execute(tensors)


def eager_call(workload: Workload) -> Callable[[], Any]:
    tensors = [torch.from_numpy(a) for a in workload.inputs]

    def call() -> Any:
        with torch.no_grad():
            return workload.eager(*tensors)

    return call


def latency_rows(
    workload: Workload, workers: int, port: int, args: argparse.Namespace
) -> list[str]:
    client = V2Client(port, f"{workload.path.stem}.{workload.method}", workload.inputs)
    runs = {
        "(a) executorch.runtime in-process": latencies(
            in_process_method(workload), args.iterations, args.warmup),
        "(b) /v2 infer, binary tensors": latencies(client.infer, args.iterations, args.warmup),
        "(c) eager PyTorch": latencies(eager_call(workload), args.iterations, args.warmup),
    }  # fmt: skip
    base = statistics.median(runs["(a) executorch.runtime in-process"])
    rows = []
    for label, samples in runs.items():
        p50, p99 = pct(samples, 50), pct(samples, 99)
        rows.append(f"| {workload.name} | {workers} | {label} | {p50:.3f} | {p99:.3f} | "
                    f"{p50 / base:.2f}x | {p50 - base:+.3f} |")  # fmt: skip
    return rows


def throughput_rows(
    workload: Workload, server: Any, port: int, pool: RuntimePool, args: argparse.Namespace
) -> list[str]:
    model = f"{workload.path.stem}.{workload.method}"

    def pool_call() -> Callable[[], bool]:
        def call() -> bool:
            pool.infer(workload.sha256, workload.method, workload.inputs, workload.path)
            return True

        return call

    rows = []
    for clients in args.clients:
        v2 = measured(lambda: V2Client(port, model, workload.inputs).infer, clients,
                      args.seconds, server.pid)  # fmt: skip
        local = measured(pool_call, clients, args.seconds, None)
        rows.append(f"| {workload.name} | {pool.size} | {clients} | {local.per_second:.0f} | "
                    f"{local.errors} | {v2.per_second:.0f} | {v2.errors} | "
                    f"{v2.per_second / local.per_second:.2f} | {v2.server_cpu_us:.0f} | "
                    f"{v2.client_cpu_us:.0f} |")  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=lambda s: [int(c) for c in s.split(",")],
                        default=[1, 4, 16])  # fmt: skip
    parser.add_argument(
        "--workers",
        type=_counts,
        default=_default_workers(),
        help="pool sizes to measure, e.g. 2,1 (default: cores, cores - 1)",
    )
    parser.add_argument("--serve-workers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--artifacts", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.serve_workers, json.loads(args.artifacts), args.home)
        return
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp), args)


def _counts(text: str) -> list[int]:
    return [int(c) for c in text.split(",")]


def _default_workers() -> list[int]:
    """All cores (the service default), then one core left to the HTTP side, if possible."""
    cores = os.cpu_count() or 1
    return [cores, cores - 1] if cores > 1 else [cores]


def run(root: Path, args: argparse.Namespace) -> None:
    workloads = build_workloads(root)
    latency: list[str] = []
    rates: list[str] = []
    for workers in args.workers:
        lat, rate = measure_config(root, workloads, workers, args)
        latency += lat
        rates += rate
    print(f"\npool sizes: {args.workers} (1 thread each), CPU cores: {os.cpu_count()}\n")
    print("| workload | workers | path | p50 ms | p99 ms | p50 vs (a) | p50 - (a) ms |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(latency))
    print("\nCPU columns: per /v2 request, in the server process (HTTP, codec, dispatch; not")
    print("the workers) and in the client threads of this process.\n")
    print("| workload | workers | clients | pool in-process req/s | errors | /v2 req/s | errors "
          "| ratio | server CPU us/req | client CPU us/req |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rates))


def measure_config(
    root: Path, workloads: list[Workload], workers: int, args: argparse.Namespace
) -> tuple[list[str], list[str]]:
    """Latency and throughput rows with a pool of ``workers`` (server and baseline alike)."""
    from tests.runtime.helpers import free_port

    port = free_port()
    server = start_server(port, workers, workloads, root / f"server-cache-{workers}")
    try:
        latency = [r for w in workloads for r in latency_rows(w, workers, port, args)]
        with RuntimePool(workers, 1 << 30, root / f"pool-cache-{workers}") as pool:
            rates = [r for w in workloads for r in throughput_rows(w, server, port, pool, args)]
    finally:
        server.terminate()
        server.wait(timeout=30)
    return latency, rates


if __name__ == "__main__":
    main()
