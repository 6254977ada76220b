"""Text generation benchmark: OpenAI streaming through ``pteforge serve`` against
ExecuTorch's in-process ``TextLLMRunner`` on the same ``.pte`` and ``tokenizer.json``.

One run measures, rounds interleaved so a busy spell of the shared machine hits every side:
(a) ``executorch.extension.llm.runner.TextLLMRunner`` in this process (greedy; times from
its token callback) and the in-process greedy loop over ``executorch.runtime``; (b) a real
``pteforge serve`` (``BENCH_ENV``: one runtime worker) streaming ``/v1/completions`` to the
unmodified ``openai`` client: time to first token from the request to the first chunk, and
the gaps between chunks (``return_token_ids``, so every token is a chunk); (c) the same
streams read by ``http.client`` (:class:`RawClient`), which tells the server's share from the
``openai`` package's own; (d) 8 concurrent streams of each client against the same 8
generations back to back in the upstream runner: aggregate tokens per second. Greedy, a
fixed prompt and ``max_tokens``; the engine has no ``ignore_eos``, so the prompt is one whose
greedy text runs to ``max_tokens`` (asserted).
Everything runs kernels on one thread, as a runtime worker does. The model:
``bench/generate_lm.py``.

Targets (issue 21): per-token p50 over HTTP <= 1.10x the runner's; time to first token
<= 1.10x + 2 ms; 8 streams >= 0.9x the back-to-back tokens per second.

Run: ``.venv/bin/python bench/generate.py [--rounds 5] [--max-tokens 64] [--workers 1]``
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.generate_lm import GreedyLoop, LmSize, Run, UpstreamRunner, build, one_thread, timed
from bench.timing import pct, single_threaded_bench
from tests.server.service import BENCH_ENV, running_service

MODEL = "bench-llama"
PROMPT = "Numbers:0123"
"""No spaces: the runner's C++ ``tokenizer.json`` reader (``pytorch_tokenizers``) drops the
pre-tokens after a space, so a spaced prompt is not the same ids there."""
STREAMS = 8
HTTP = "(b) openai stream, /v1/completions"
RAW = "(c) raw SSE stream, http.client"


def deploy(url: str, token: str, lm: Path) -> None:
    """The LM as version 1 of :data:`MODEL`, with its tokenizer."""
    import httpx

    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
        pte = {"pte": ("model.pte", (lm / "model.pte").read_bytes())}
        artifact = client.post("/v1/artifacts", files=pte, timeout=300)
        artifact.raise_for_status()
        body = {"artifact_id": artifact.json()["id"]}
        client.post(f"/v1/models/{MODEL}/versions", json=body).raise_for_status()
        files = {
            name: (f"{name}.json", (lm / f"{name}.json").read_bytes())
            for name in ("tokenizer", "tokenizer_config")
        }
        answer = client.put(f"/v1/models/{MODEL}/versions/1/tokenizer", files=files)
        answer.raise_for_status()


def streamed(client: Any, max_tokens: int) -> tuple[Run, list[int]]:
    """One streamed completion: its times and token ids."""
    start = time.perf_counter()
    stream = client.completions.create(
        model=MODEL, prompt=PROMPT, max_tokens=max_tokens, temperature=0, stream=True,
        extra_body={"return_token_ids": True},
    )  # fmt: skip
    stamps: list[float] = []
    ids: list[int] = []
    for chunk in stream:
        got = chunk.choices[0].to_dict().get("token_ids", []) if chunk.choices else []
        stamps += [time.perf_counter()] * len(got)
        ids += got
    return timed(start, stamps), ids


class RawClient:
    """The same streamed completion read by the standard library's ``http.client``, one
    kept-alive connection per thread: what the server adds, without the ``openai`` package's
    own per-request and per-chunk work (about 2 ms a request, measured against this one)."""

    def __init__(self, url: str, token: str) -> None:
        self.host, _, port = url.removeprefix("http://").partition(":")
        self.port = int(port)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.local = threading.local()

    def streamed(self, max_tokens: int) -> tuple[Run, list[int]]:
        body = {"model": MODEL, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0,
                "stream": True, "return_token_ids": True}  # fmt: skip
        if not hasattr(self.local, "conn"):
            self.local.conn = http.client.HTTPConnection(self.host, self.port)
        start = time.perf_counter()
        self.local.conn.request("POST", "/v1/completions", json.dumps(body), self.headers)
        answer = self.local.conn.getresponse()
        assert answer.status == 200, answer.read()
        stamps: list[float] = []
        ids: list[int] = []
        while (line := answer.readline()) and line != b"data: [DONE]\n":
            if line.startswith(b"data: "):
                choices = json.loads(line[6:])["choices"]
                got = choices[0].get("token_ids", []) if choices else []
                stamps += [time.perf_counter()] * len(got)
                ids += got
        answer.read()
        return timed(start, stamps), ids


def concurrent(stream: Any, max_tokens: int) -> float:
    """Tokens per second of :data:`STREAMS` streams at once."""
    with ThreadPoolExecutor(STREAMS) as pool:
        start = time.perf_counter()
        runs = list(pool.map(lambda _: stream(max_tokens)[0], range(STREAMS)))
        elapsed = time.perf_counter() - start
    return sum(r.tokens for r in runs) / elapsed


def back_to_back(runner: UpstreamRunner, max_tokens: int) -> float:
    """Tokens per second of :data:`STREAMS` runner generations one after the other."""
    start = time.perf_counter()
    tokens = sum(runner.run(PROMPT, max_tokens).tokens for _ in range(STREAMS))
    return tokens / (time.perf_counter() - start)


def rounds(lm: Path, client: Any, raw: RawClient, count: int, max_tokens: int) -> dict[str, Any]:
    """Interleaved rounds of every measurement, after one untimed warm-up of each."""
    runner, loop = UpstreamRunner(lm), GreedyLoop(lm)
    sides = {
        "(a) TextLLMRunner, in process": lambda: runner.run(PROMPT, max_tokens),
        "(a) greedy loop, executorch.runtime": lambda: loop.run(PROMPT, max_tokens),
        HTTP: lambda: streamed(client, max_tokens)[0],
        RAW: lambda: raw.streamed(max_tokens)[0],
    }
    runs: dict[str, list[Run]] = {label: [] for label in sides}
    streams = {"openai": lambda n: streamed(client, n), "raw": raw.streamed}
    rates: dict[str, list[float]] = {"back to back": [], "openai": [], "raw": []}
    loop.run(PROMPT, max_tokens)
    for name, stream in streams.items():
        _, ids = stream(max_tokens)
        assert ids == loop.tokens, f"{name} tokens {ids} differ from the loop's {loop.tokens}"
    assert len(ids) == max_tokens, f"{PROMPT!r} ended after {len(ids)} tokens: pick another"
    runner.run(PROMPT, max_tokens)
    for _ in range(count):
        for label, side in sides.items():
            runs[label].append(side())
            assert runs[label][-1].tokens == max_tokens, (label, runs[label][-1].tokens)
        rates["back to back"].append(back_to_back(runner, max_tokens))
        for name, stream in streams.items():
            rates[name].append(concurrent(stream, max_tokens))
    return {"runs": runs, "rates": rates, "prompt_tokens": runner.prompt_tokens}


def _figures(samples: list[Run]) -> tuple[float, float, float, float]:
    """TTFT median, per-token p50, p90 and mean (ms) of ``samples``."""
    gaps = [g for r in samples for g in r.gaps_ms]
    ttft = statistics.median(r.ttft_ms for r in samples)
    return ttft, pct(gaps, 50), pct(gaps, 90), statistics.fmean(gaps)


def report(results: dict[str, Any]) -> None:
    """The latency table, the throughput table and the targets' ratios."""
    runs: dict[str, list[Run]] = results["runs"]
    ttft0, p50_0, _, mean0 = _figures(next(iter(runs.values())))
    print("| side | TTFT ms (median) | per-token ms p50 / p90 / mean | TTFT vs runner "
          "| per-token p50 vs runner (mean) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for label, samples in runs.items():
        ttft, p50, p90, mean = _figures(samples)
        print(
            f"| {label} | {ttft:.2f} | {p50:.3f} / {p90:.3f} / {mean:.3f} | {ttft / ttft0:.2f}x "
            f"({ttft - ttft0:+.2f} ms) | {p50 / p50_0:.2f}x ({mean / mean0:.2f}x) |"
        )
    rates = {k: statistics.median(v) for k, v in results["rates"].items()}
    base = rates.pop("back to back")
    print(f"\n| {STREAMS} generations | tokens/s (median) |\n|---|---|")
    print(f"| back to back, TextLLMRunner | {base:.0f} |")
    for name, rate in rates.items():
        print(f"| {STREAMS} concurrent {name} streams | {rate:.0f} ({rate / base:.2f}x) |")
    print("\ntargets: per-token p50 <= 1.10x; TTFT <= 1.10x + 2 ms; 8 streams >= 0.9x")
    for label, name in ((HTTP, "openai"), (RAW, "raw")):
        ttft, p50, _, _ = _figures(runs[label])
        print(
            f"{name}: per-token p50 {p50 / p50_0:.2f}x; TTFT {ttft:.2f} ms (<= "
            f"{1.1 * ttft0 + 2:.2f} ms: {ttft <= 1.1 * ttft0 + 2}); "
            f"{STREAMS} streams {rates[name] / base:.2f}x"
        )


def main() -> None:
    args, work = single_threaded_bench(
        __doc__.splitlines()[0], "generate-bench-", rounds=5, max_tokens=64, workers=1,
        hidden=LmSize.hidden, layers=LmSize.layers,
    )  # fmt: skip
    import openai

    size = LmSize(args.hidden, args.layers)
    lm = build(size)
    one_thread()
    env = {**BENCH_ENV, "PTEFORGE_RUNTIME_POOL_SIZE": str(args.workers)}
    with running_service(work / "home", env) as svc:
        assert svc.admin_token, "the server printed no admin token"
        deploy(svc.url, svc.admin_token, lm)
        client = openai.OpenAI(base_url=f"{svc.url}/v1", api_key=svc.admin_token, max_retries=0)
        print(
            f"model: Llama hidden {size.hidden}, {size.layers} layers, context "
            f"{size.max_seq_len}; prompt {PROMPT!r}, {args.max_tokens} tokens; "
            f"{args.workers} runtime worker(s); {args.rounds} rounds; "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        raw = RawClient(svc.url, svc.admin_token)
        results = rounds(lm, client, raw, args.rounds, args.max_tokens)
    print(f"prompt tokens (runner): {results['prompt_tokens']}")
    print(f"load average after: {os.getloadavg()[0]:.1f}\n")
    report(results)


if __name__ == "__main__":
    main()
