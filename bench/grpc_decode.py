"""Decode loop over gRPC: greedy decoding one token a request on a ``ModelStreamInfer``
stream (issue 20's target: per-token p50 within 0.5 ms of the in-process loop).

The workloads of ``bench/sessions.py`` (a KV-cached LM: ``prefill`` then ``decode``; a
Whisper-style model: ``encode`` then ``decode``), each compiled with XNNPACK and uploaded as
a ``.pte`` to a real ``pteforge serve`` (``BENCH_ENV``). Per decoded token, in one run:
(a) the in-process ``executorch.runtime`` loop on one program instance, one thread as a
worker runs;
(b) unmodified ``tritonclient.grpc`` on one ``ModelStreamInfer`` stream, a sequence
(``sequence_id``; the first request starts it, the last ends it), one request a token;
(c) the same sequence over unary ``ModelInfer`` calls.
Reported: p50/p99 ms per token and p50 - (a) p50; each run's tokens are held equal to (a)'s.

Run: ``.venv/bin/python bench/grpc_decode.py [--runs 3] [--tokens 64]``
"""

from __future__ import annotations

import queue
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.grpc_overhead import upload_pte
from bench.sessions import Decoder, Workload, _percentiles, _start, _token, decode_in_process
from bench.sessions import workloads as session_workloads
from bench.timing import single_threaded_bench
from tests.server.service import BENCH_ENV, ServiceProcess

Send = Callable[[str, list[np.ndarray], dict[str, Any]], np.ndarray]
"""One request of a sequence: the model, its input arrays, the sequence parameters; the
first output."""


class Triton:
    """``tritonclient.grpc`` calls to one server: unary, or on one open stream."""

    def __init__(self, port: int, token: str) -> None:
        import tritonclient.grpc as grpcclient

        self.grpc = grpcclient
        self.client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        self.headers = {"authorization": f"Bearer {token}"}
        self.answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self.client.start_stream(self._answered, headers=self.headers)
        self._names: dict[str, list[tuple[str, str]]] = {}

    def _answered(self, result: Any, error: Any) -> None:  # tritonclient passes keywords
        self.answers.put((result, error))

    def inputs(self, model: str, arrays: list[np.ndarray]) -> list[Any]:
        """``arrays`` as the named, typed inputs ``model``'s metadata lists."""
        if model not in self._names:
            meta = self.client.get_model_metadata(model, headers=self.headers, as_json=True)
            self._names[model] = [(i["name"], i["datatype"]) for i in meta["inputs"]]
        tensors = []
        for (name, datatype), array in zip(self._names[model], arrays, strict=True):
            tensor = self.grpc.InferInput(name, list(array.shape), datatype)
            tensor.set_data_from_numpy(array.astype(_NUMPY[datatype]))
            tensors.append(tensor)
        return tensors

    def streamed(self, model: str, arrays: list[np.ndarray], sequence: dict[str, Any]) -> Any:
        self.client.async_stream_infer(model, self.inputs(model, arrays), **sequence)
        result, error = self.answers.get(timeout=120)
        if error is not None:
            raise RuntimeError(str(error))
        return result.as_numpy(result.get_response().outputs[0].name)

    def unary(self, model: str, arrays: list[np.ndarray], sequence: dict[str, Any]) -> Any:
        inputs = self.inputs(model, arrays)
        result = self.client.infer(model, inputs, headers=self.headers, **sequence)
        return result.as_numpy(result.get_response().outputs[0].name)

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


_NUMPY = {"INT64": np.int64, "INT32": np.int32, "FP32": np.float32}


def decode_sequence(send: Send, artifact: str, work: Workload, steps: int, sid: int) -> Decoder:
    """The device's loop as requests of one sequence: the setup calls (the first starts it),
    then ``decode`` a token a request, the last ending it."""
    logits = None
    for i, (method, arrays) in enumerate(work.first):
        logits = send(
            f"{artifact}.{method}", arrays, {"sequence_id": sid, "sequence_start": i == 0}
        )
    token, position = _token(logits), _start(work)
    for i in range(steps):
        sequence = {"sequence_id": sid, "sequence_end": i == steps - 1}
        start = time.perf_counter()
        logits = send(f"{artifact}.decode", [np.array([[token]]), np.array([position])], sequence)
        token = _token(logits)
        yield token, (time.perf_counter() - start) * 1e3, 0
        position += 1


def report(work: Workload, artifact: str, triton: Triton, steps: int, runs: int) -> None:
    names = {"a": "(a) executorch.runtime in-process", "b": "(b) gRPC ModelStreamInfer stream",
             "c": "(c) gRPC unary ModelInfer"}  # fmt: skip
    times: dict[str, list[float]] = {key: [] for key in names}
    same = True
    for run in range(runs + 1):  # the first run warms up
        decoders: dict[str, Iterator[tuple[int, float, int]]] = {
            "a": decode_in_process(work, steps),
            "b": decode_sequence(triton.streamed, artifact, work, steps, 2 * run + 1),
            "c": decode_sequence(triton.unary, artifact, work, steps, 2 * run + 2),
        }
        decoded = {key: list(decoder) for key, decoder in decoders.items()}
        same = same and len({tuple(t for t, _, _ in d) for d in decoded.values()}) == 1
        if run:
            for key, done in decoded.items():
                times[key].extend(ms for _, ms, _ in done)
    base = _percentiles(times["a"])[0]
    label = "same tokens" if same else "TOKENS DIFFER"
    for key, name in names.items():
        p50, p99 = _percentiles(times[key])
        print(f"| {work.name} ({label}) | {steps} | {name} | {p50:.3f} | {p99:.3f} | "
              f"{p50 - base:+.3f} |")  # fmt: skip


def main() -> None:
    args, root = single_threaded_bench(
        __doc__.splitlines()[0], "bench-grpc-decode-", runs=3, tokens=64
    )
    works = session_workloads(root)
    svc = ServiceProcess(root / "home", env=BENCH_ENV)
    svc.start(timeout=300)
    try:
        assert svc.admin_token, "the server printed no admin token"
        triton = Triton(svc.grpc_port, svc.admin_token)
        print("| workload | tokens | path | p50 ms | p99 ms | p50 - (a) ms |")
        print("|---|---:|---|---:|---:|---:|")
        for work in works:
            artifact = upload_pte(svc, svc.admin_token, work.path)
            report(work, artifact, triton, args.tokens, args.runs)
        triton.close()
    finally:
        svc.stop()


if __name__ == "__main__":
    main()
