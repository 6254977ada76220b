"""Full-speed single requests (issue 20): /v2 on a lone request against in-process ExecuTorch
on every core, and 16 clients against the in-process pool, in one run.

1. The zoo's Whisper encoder (bench size), lowered to XNNPACK, run in this process with
   ExecuTorch's threadpool at 1 thread and at every core (its cost to resize, too: the pool
   is per process, and a method loaded before a resize must not run after it), then
   through a real ``pteforge serve`` (``BENCH_ENV``: one runtime worker) with unmodified
   ``tritonclient.http`` (binary tensors): once with ``PTEFORGE_RUNTIME_REQUEST_THREADS=1``
   (one thread) and once with ``=0`` (the default: a lone request on the wide worker, every
   core), and the same over gRPC (``tritonclient.grpc``). Target: /v2 p50 / in-process
   every-core p50 <= 1.10, over HTTP and gRPC. The same for an encoder of Whisper tiny's
   shape (80 mels x 3000 frames in, about 1 MB; 1500 x 384 out, 2.3 MB; 4 layers, random
   weights), the size the issue measured (``--large-iterations``, 0 to skip it).
2. The small encoder of ``bench/runtime.py`` with 16 concurrent clients: ``/v2``
   (``bench/v2_server.py``) against the same ``RuntimePool`` called from 16 threads in this
   process, pools of ``--workers`` workers. Target: ratio >= 0.9.

Run: ``.venv/bin/python bench/v2_threads.py [--iterations 50] [--warmup 5] [--seconds 5]
[--large-iterations 8] [--part 1|2]``
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.grpc_overhead import grpc_calls, http_calls, upload_pte
from bench.runtime import V2Client, build_workloads
from bench.timing import latencies, measured, pct, single_threaded_bench
from bench.v2_server import start_server
from pteforge.runtime import RuntimePool
from pteforge.runtime.threads import usable_cores
from tests.server.service import BENCH_ENV, ServiceProcess
from tests.zoo import BY_NAME


def whisper_encoder(path: Path, size: str) -> list[np.ndarray]:
    """A Whisper encoder lowered to XNNPACK at ``path``; its inputs. ``size``: the zoo's
    ``bench`` size, or ``tiny`` (Whisper tiny's encoder shape, random weights)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    if size == "bench":
        model = BY_NAME["whisper"].build("bench")
        program, inputs = model.methods()["encode"], model.example_inputs("encode")
    else:
        program, inputs = _whisper_tiny_encoder()
    lowered = to_edge_transform_and_lower({"encode": program}, partitioner=[XnnpackPartitioner()])
    path.write_bytes(lowered.to_executorch().buffer)
    return [t.numpy() for t in inputs]


def _whisper_tiny_encoder() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(
        num_mel_bins=80, d_model=384, encoder_layers=4, encoder_attention_heads=6,
        encoder_ffn_dim=1536, max_source_positions=1500,
    )  # fmt: skip
    encoder = WhisperModel(config).get_encoder().eval()

    class Encode(torch.nn.Module):
        def forward(self, features: torch.Tensor) -> torch.Tensor:
            return encoder(input_features=features, return_dict=True)[0]

    features = (torch.randn(1, 80, 3000, generator=torch.Generator().manual_seed(0)),)
    return torch.export.export(Encode(), features), features


def in_process(
    path: Path, inputs: list[np.ndarray], iterations: int, warmup: int
) -> dict[str, float]:
    """p50 ms at 1 thread and at every core, and the mean ms of one threadpool resize.

    The method is loaded again after each resize: XNNPACK binds a method to the threadpool
    it loads under, and a resize frees that pool (executing it after one corrupts the heap).
    """
    import torch
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    module = runtime._legacy_module  # executorch.extension.pybindings.portable_lib
    tensors = [torch.from_numpy(a) for a in inputs]
    p50s = {}
    for threads in (1, usable_cores()):
        module._unsafe_reset_threadpool(threads)
        assert module._threadpool_get_thread_count() == threads
        program = runtime.load_program(path)  # loaded under this size, held while it runs
        execute = partial(program.load_method("encode").execute, tensors)
        p50s[f"in-process, {threads} thread(s)"] = pct(latencies(execute, iterations, warmup), 50)
        del execute, program
    start = time.perf_counter()
    for i in range(100):
        module._unsafe_reset_threadpool(1 + i % 2 * (usable_cores() - 1))
    p50s["threadpool resize, no method loaded (mean)"] = (time.perf_counter() - start) / 100 * 1e3
    return p50s


def over_v2(
    path: Path, inputs: list[np.ndarray], work: Path, threads: str, iterations: int, warmup: int
) -> dict[str, float]:
    """p50 ms of /v2 infer over HTTP and gRPC on a real ``pteforge serve`` (one runtime
    worker) with ``PTEFORGE_RUNTIME_REQUEST_THREADS=threads``."""
    env = {**BENCH_ENV, "PTEFORGE_RUNTIME_REQUEST_THREADS": threads}
    svc = ServiceProcess(work / f"home-{threads}-{path.stem}", env=env)
    svc.start(timeout=600)
    try:
        assert svc.admin_token, "the server printed no admin token"
        model = f"{upload_pte(svc, svc.admin_token, path)}.encode"
        http, _ = http_calls(svc.url, svc.admin_token, model, inputs)
        grpc, _ = grpc_calls(svc.grpc_port, svc.admin_token, model, inputs)
        return {
            "HTTP": pct(latencies(http, iterations, warmup), 50),
            "gRPC": pct(latencies(grpc, iterations, warmup), 50),
        }
    finally:
        svc.stop()


def single_request(work: Path, args: Any, size: str, iterations: int) -> None:
    path = work / f"whisper-encoder-{size}.pte"
    inputs = whisper_encoder(path, size)
    p50s = in_process(path, inputs, iterations, args.warmup)
    for threads, label in (("1", "1 thread (=1)"), ("0", "wide worker while quiet (=0, default)")):
        for protocol, p50 in over_v2(path, inputs, work, threads, iterations, args.warmup).items():
            p50s[f"/v2 {protocol}, {label}"] = p50
    base = p50s[f"in-process, {usable_cores()} thread(s)"]
    megabytes = sum(a.nbytes for a in inputs) / 1e6
    print(f"\nWhisper encoder ({size} size, {megabytes:.2f} MB in), XNNPACK, ", end="")
    print(f"{usable_cores()} cores")
    print(f"p50 of {iterations} calls after {args.warmup} warm-up\n")
    print("| path | p50 ms | / in-process every core |")
    print("|---|---|---|")
    for label, p50 in p50s.items():
        print(f"| {label} | {p50:.3f} | {p50 / base:.2f} |")


def concurrent_clients(work: Path, args: Any, request_threads: int) -> str:
    """The row of 16 clients, /v2 against the in-process pool, both with ``request_threads``
    (0: a wide worker for lone requests; 1: one-thread workers only, as before)."""
    encoder = build_workloads(work)[1]
    model = f"{encoder.path.stem}.{encoder.method}"
    artifacts = {encoder.path.stem: encoder.path}
    home = work / f"v2-{request_threads}"
    server, port = start_server(artifacts, home, args.workers, request_threads=request_threads)

    def pool_call(pool: RuntimePool) -> Callable[[], Callable[[], bool]]:
        def call() -> bool:
            pool.infer(encoder.sha256, encoder.method, encoder.inputs, encoder.path)
            return True

        return lambda: call

    try:
        v2 = measured(lambda: V2Client(port, model, encoder.inputs).infer, 16, args.seconds,
                      server.pid)  # fmt: skip
        threads = request_threads or None
        with RuntimePool(args.workers, 1 << 30, home / "pool", request_threads=threads) as pool:
            local = measured(pool_call(pool), 16, args.seconds, None)
    finally:
        server.terminate()
        server.wait(timeout=30)
    ratio = v2.per_second / local.per_second
    return (f"| {request_threads} | {local.per_second:.0f} | {v2.per_second:.0f} | "
            f"{v2.errors} | {ratio:.2f} |")  # fmt: skip


def clients_table(work: Path, args: Any) -> None:
    rows = [concurrent_clients(work, args, threads) for threads in (1, 0)]
    print(f"\nseq2seq encoder (bench/runtime.py), 16 clients, pools of {args.workers} worker(s)\n")
    print("| request threads | in-process pool req/s | /v2 req/s | errors | ratio |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


def main() -> None:
    args, work = single_threaded_bench(
        __doc__.splitlines()[0], "v2-threads-", iterations=50, warmup=5, seconds=5,
        workers=max(1, usable_cores() - 1), part=0,  # 1 or 2: that part alone
        large_iterations=8,
    )  # fmt: skip
    if args.part in (0, 1):
        single_request(work, args, "bench", args.iterations)
        if args.large_iterations:
            single_request(work, args, "tiny", args.large_iterations)
    if args.part in (0, 2):
        clients_table(work, args)


if __name__ == "__main__":
    main()
