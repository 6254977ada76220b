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
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timing import latencies, measured, pct
from bench.v2_server import start_server
from bench.v2_wire import Connection, infer_request
from pteforge.runtime import RuntimePool
from tests.models import TinySeq2Seq, export_methods, small_mlp_programs


class V2Client(Connection):
    """Posts one pre-encoded binary infer request again and again on one connection."""

    def __init__(self, port: int, model: str, inputs: list[np.ndarray]) -> None:
        super().__init__(port)
        self.request = infer_request(model, inputs)

    def infer(self) -> bool:
        status, _, _ = self.exchange(self.request)
        return status.startswith(b"HTTP/1.1 200")


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
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
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
    args = parser.parse_args()
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
    artifacts = {w.path.stem: w.path for w in workloads}
    server, port = start_server(artifacts, root / f"server-cache-{workers}", workers)
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
