"""Session benchmark: greedy decoding in-process, over /v2 sessions, and over stateless /v2.

Two workloads, tiny random-weight models compiled with XNNPACK and mutable buffers shared
across methods (``tests/runtime/stateful_models.py``):
- a decoder-only LM (vocab 256, d=64, 2 layers) whose KV cache is buffers: ``prefill`` then
  ``decode`` one token per call;
- a Whisper-style model (16 mels x 32 frames, d=64, 2 decoder layers): ``encode`` stores the
  cross-attention keys/values, ``decode`` runs one token against them and its cache.
Each greedily decodes 32 and 128 tokens three ways:
(a) an in-process ``executorch.runtime`` loop on one program instance;
(b) ``/v2`` with a session (``sequence_id``; the first request starts it, the last ends it):
    each step sends one token and its position;
(c) ``/v2`` stateless: each step resends the whole context (LM: every token so far to
    ``prefill``; Whisper: the tokens and the encoder output to ``decode_with``).
Reported per decoded token: latency p50/p99 (ms) and request bytes (HTTP head and body).
Targets: (b) p50 within 1 ms of (a); (b) bytes/token independent of the context length;
(b) faster than (c) at 128 tokens. The server is a subprocess running the /v2 router over
a pool of one runtime worker (the other core serves HTTP and this client); the client is a
raw keep-alive socket, binary tensors both ways.

Run: ``.venv/bin/python bench/sessions.py [--runs 3]``
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timing import single_threaded_bench
from bench.v2_server import start_server
from bench.v2_wire import Connection, first_output, infer_request
from tests.runtime.stateful_compile import compile_stateful
from tests.runtime.stateful_models import cached_lm_programs, whisper_programs

MAX_LEN = 160
LM = {"vocab": 256, "d_model": 64, "heads": 4, "layers": 2, "max_len": MAX_LEN}
WHISPER = {"mels": 16, "frames": 32, "vocab": 256, "d_model": 64, "heads": 4, "layers": 2,
           "max_len": MAX_LEN}  # fmt: skip
PROMPT = 8


class Client(Connection):
    """Posts binary-tensor infer requests on one socket; counts the bytes it sends."""

    def infer(
        self, model: str, arrays: list[np.ndarray], parameters: dict[str, Any]
    ) -> tuple[np.ndarray, int]:
        """The first output of ``model`` on ``arrays``, and the request's size in bytes."""
        request = infer_request(model, arrays, parameters)
        status, lengths, body = self.exchange(request)
        if not status.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"{status!r}: {body[:500]!r}")
        return first_output(lengths, body), len(request)


# -- the decoding loops --------------------------------------------------------------------------


@dataclass
class Workload:
    name: str
    path: Path
    first: list[tuple[str, list[np.ndarray]]]  # calls before the first token (logits: last)
    context: Any  # what a stateless step resends besides the tokens (encoder output)


def _token(logits: Any) -> int:
    return int(np.asarray(logits)[0, -1].argmax())


# Each decoder is a generator: it does its setup (prefill or encode: the first token), then
# yields (token, ms, request bytes) per decoded token. A run decodes (a), (b), (c) one after
# the other, each in a tight loop as a client would; runs repeat, so a busy spell on the
# (shared) machine is spread over the three.
Decoder = Iterator[tuple[int, float, int]]


def decode_in_process(work: Workload, steps: int) -> Decoder:
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    runtime._legacy_module._unsafe_reset_threadpool(1)  # one thread, as in a worker
    program = runtime.load_program(work.path)
    methods = {name: program.load_method(name) for name in program.method_names}
    run = lambda m, arrays: methods[m].execute([torch.from_numpy(a) for a in arrays])[0]  # noqa: E731
    logits = [run(method, arrays) for method, arrays in work.first][-1]
    token, position = _token(logits), _start(work)
    for _ in range(steps):
        start = time.perf_counter()
        token = _token(run("decode", [np.array([[token]]), np.array([position])]))
        yield token, (time.perf_counter() - start) * 1e3, 0
        position += 1


def _start(work: Workload) -> int:
    return PROMPT if work.name.startswith("LM") else 1


def decode_session(client: Client, work: Workload, steps: int, sid: int) -> Decoder:
    model = work.name.split()[0]
    logits = None
    for i, (method, arrays) in enumerate(work.first):
        parameters = {"sequence_id": sid, "sequence_start": i == 0}
        logits, _ = client.infer(f"{model}.{method}", arrays, parameters)
    token, position = _token(logits), _start(work)
    for i in range(steps):
        parameters = {"sequence_id": sid, "sequence_end": i == steps - 1}
        start = time.perf_counter()
        step = [np.array([[token]]), np.array([position])]
        logits, size = client.infer(f"{model}.decode", step, parameters)
        token = _token(logits)
        yield token, (time.perf_counter() - start) * 1e3, size
        position += 1


def decode_stateless(client: Client, work: Workload, steps: int) -> Decoder:
    model = work.name.split()[0]
    if work.context is None:  # LM: the prompt, then every token so far, to prefill
        context = [int(t) for t in work.first[0][1][0][0]]
        method, extra = "prefill", []
    else:  # Whisper: the encoder output once, then tokens and encoder output every step
        extra = [client.infer(f"{model}.encode", work.first[0][1], {})[0].copy()]
        context, method = [1], "decode_with"
    logits, _ = client.infer(f"{model}.{method}", [np.array([context]), *extra], {})
    context.append(_token(logits))
    for _ in range(steps):
        start = time.perf_counter()
        logits, size = client.infer(f"{model}.{method}", [np.array([context]), *extra], {})
        context.append(_token(logits))
        yield context[-1], (time.perf_counter() - start) * 1e3, size


def _percentiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return float(np.percentile(ordered, 50)), float(np.percentile(ordered, 99))


def workloads(root: Path) -> list[Workload]:
    torch.manual_seed(0)
    lm = compile_stateful(cached_lm_programs(prompt=PROMPT, **LM), root / "LM.pte")
    whisper = compile_stateful(whisper_programs(**WHISPER), root / "Whisper.pte")
    prompt = np.random.default_rng(0).integers(0, LM["vocab"], (1, PROMPT))
    features = np.random.default_rng(1).standard_normal((1, 16, 32)).astype(np.float32)
    start = [np.array([[1]]), np.array([0])]
    return [
        Workload("LM (prefill + decode)", lm.path, [("prefill", [prompt])], None),
        Workload(
            "Whisper (encode + decode)",
            whisper.path,
            [("encode", [features]), ("decode", start)],
            features,
        ),
    ]


def main() -> None:
    args, root = single_threaded_bench(__doc__, "bench-sessions-", runs=3)
    works = workloads(root)
    server, port = start_server({w.name.split()[0]: w.path for w in works}, root / "home")
    try:
        client = Client(port)
        print("| workload | tokens | path | p50 ms | p99 ms | p50 - (a) ms | request bytes/token |")
        print("|---|---:|---|---:|---:|---:|---:|")
        sid = [0]
        for work in works:
            for steps in (32, 128):
                report(work, steps, client, args.runs, sid)
    finally:
        server.kill()


def report(work: Workload, steps: int, client: Client, runs: int, sid: list[int]) -> None:
    names = {"a": "(a) executorch.runtime in-process", "b": "(b) /v2 session",
             "c": "(c) /v2 stateless, context resent"}  # fmt: skip
    times: dict[str, list[float]] = {key: [] for key in names}
    sizes: dict[str, list[int]] = {key: [] for key in names}
    same = True
    for run in range(runs + 1):  # the first run warms up
        sid[0] += 1
        decoders = {
            "a": decode_in_process(work, steps),
            "b": decode_session(client, work, steps, sid[0]),
            "c": decode_stateless(client, work, steps),
        }
        decoded = {key: list(decoder) for key, decoder in decoders.items()}
        same = same and len({tuple(t for t, _, _ in steps) for steps in decoded.values()}) == 1
        if run == 0:
            continue
        for key, steps_done in decoded.items():
            times[key].extend(ms for _, ms, _ in steps_done)
            sizes[key].extend(size for _, _, size in steps_done)
    base = _percentiles(times["a"])[0]
    label = "same tokens" if same else "TOKENS DIFFER"
    for key, name in names.items():
        p50, p99 = _percentiles(times[key])
        size = f"{np.mean(sizes[key]):,.0f}" if key != "a" else "-"
        print(f"| {work.name} ({label}) | {steps} | {name} | {p50:.3f} | {p99:.3f} | "
              f"{p50 - base:+.3f} | {size} |")  # fmt: skip


if __name__ == "__main__":
    main()
