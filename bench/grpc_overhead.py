"""gRPC overhead benchmark: a small model through ``pteforge serve`` over gRPC and over HTTP,
against ``executorch.runtime`` in-process on the same ``.pte``, in the same run.

A real ``pteforge serve`` (one runtime worker, ``BENCH_ENV``) serves a small XNNPACK MLP
uploaded as a ``.pte``; unmodified clients call it one at a time: ``tritonclient.grpc``
(raw tensor contents) and ``tritonclient.http`` (binary tensors). Reported: p50/p99 ms of
each, and each p50 minus the in-process p50 (issue 20's targets: <= 0.3 ms over gRPC,
<= 0.5 ms over HTTP). Plus the bare health call (``ServerLive``, ``GET /v2/health/live``)
on each protocol, the floor the protocol stack sets.

Run: ``.venv/bin/python bench/grpc_overhead.py [--iterations 500] [--warmup 50]``
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.runtime import Workload, _compile, in_process_method
from bench.timing import latencies, pct, single_threaded_bench
from tests.models import small_mlp_programs
from tests.server.service import BENCH_ENV, ServiceProcess


def upload_pte(svc: ServiceProcess, token: str, pte: Path) -> str:
    """The id of the artifact ``pte`` uploaded to ``svc`` with ``token``."""
    with svc.client(token) as client:
        answer = client.post("/v1/artifacts", files={"pte": ("mlp.pte", pte.read_bytes())})
        answer.raise_for_status()
        return str(answer.json()["id"])


def grpc_calls(port: int, token: str, model: str, inputs: list[np.ndarray]) -> tuple[Any, Any]:
    """``tritonclient.grpc`` calls (raw tensor contents): infer ``model`` on ``inputs``, and
    live."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
    headers = {"authorization": f"Bearer {token}"}
    tensors = []
    for i, array in enumerate(inputs):
        tensor = grpcclient.InferInput(f"input_{i}", list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return (lambda: client.infer(model, tensors, headers=dict(headers))), client.is_server_live


def http_calls(url: str, token: str, model: str, inputs: list[np.ndarray]) -> tuple[Any, Any]:
    """``tritonclient.http`` calls (binary tensors): infer ``model`` on ``inputs``, and live."""
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(url.removeprefix("http://"))
    headers = {"Authorization": f"Bearer {token}"}
    tensors = []
    for i, array in enumerate(inputs):
        tensor = httpclient.InferInput(f"input_{i}", list(array.shape), "FP32")
        tensor.set_data_from_numpy(array, binary_data=True)
        tensors.append(tensor)
    # a fresh headers dict per call: tritonclient writes the binary header's length into it
    return (lambda: client.infer(model, tensors, headers=dict(headers))), client.is_server_live


def _rows(runs: dict[str, list[float]], base: float) -> None:
    print("| call | p50 ms | p99 ms | p50 - in-process p50 |")
    print("|---|---|---|---|")
    for label, samples in runs.items():
        p50, p99 = pct(samples, 50), pct(samples, 99)
        print(f"| {label} | {p50:.3f} | {p99:.3f} | {p50 - base:+.3f} |")


def measure(
    workload: Workload, svc: ServiceProcess, token: str, iterations: int, warmup: int
) -> None:
    model = f"{upload_pte(svc, token, workload.path)}.forward"
    grpc_infer, grpc_live = grpc_calls(svc.grpc_port, token, model, workload.inputs)
    http_infer, http_live = http_calls(svc.url, token, model, workload.inputs)
    timed: dict[str, Callable[[], Any]] = {
        "(a) executorch.runtime in-process": in_process_method(workload),
        "(b) gRPC ModelInfer, raw tensors": grpc_infer,
        "(c) HTTP /v2 infer, binary tensors": http_infer,
        "(d) gRPC ServerLive": grpc_live,
        "(e) HTTP GET /v2/health/live": http_live,
    }
    runs = {label: latencies(call, iterations, warmup) for label, call in timed.items()}
    _rows(runs, pct(runs["(a) executorch.runtime in-process"], 50))


def main() -> None:
    args, work = single_threaded_bench(
        __doc__.splitlines()[0], "grpc-bench-", iterations=500, warmup=50
    )
    workload = _compile(small_mlp_programs(), "forward", work / "mlp.pte", "small MLP")
    svc = ServiceProcess(work / "home", env=BENCH_ENV)
    svc.start(timeout=300)
    try:
        assert svc.admin_token, "the server printed no admin token"
        measure(workload, svc, svc.admin_token, args.iterations, args.warmup)
    finally:
        svc.stop()


if __name__ == "__main__":
    main()
