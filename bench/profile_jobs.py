"""Profile jobs: what a profile costs over plain runs, and whether its p50 is real (issue 19).

For a small MLP and the encoder of an encoder/decoder model (XNNPACK), each round starts two
fresh processes, in alternating order, each with the lowering fork server's imports
(``LOWERING_PRELOAD``) done before its clock starts, as a profile job's lowering child has:
- (p) :func:`pteforge.runtime.profile_run.profile_program` on ``N`` iterations, as a profile
  job runs it (its own cold and warm loads, timed runs, ETDump runs and their reading);
- (r) the same ``.pte`` loaded once and run ``N`` times plainly, each run timed.

Targets: (p) <= 1.2x (r)'s ``N`` executions, plus the loads, i.e. ``(p wall - p loads) /
(r wall - r load) <= 1.2``; and (p)'s p50 within 10% of (r)'s. Where the rest of (p) goes
(reading the ETDump back, the program's delegate table) is timed inside (p). Each side's
process CPU time is given too: on a loaded machine it moves less than wall time. "runs read":
how many traced runs the profile's operator rows sum over (``operator_runs``).

Run: ``.venv/bin/python bench/profile_jobs.py [--rounds 5] [--iterations 200,100]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


READ_BACK = ("etdump_bytes", "etdump_runs", "summarize_runs", "delegate_backends", "operator_times")
"""What :func:`profile_program` calls to make its operator rows, once the runs are done."""


def _preloaded() -> None:
    """The lowering fork server's imports, so neither side pays them on its clock."""
    import importlib

    from pteforge.children.forkserver import LOWERING_PRELOAD

    for name in (*LOWERING_PRELOAD, "pteforge.runtime.profile_run"):
        importlib.import_module(name)


def _timed(module: Any, name: str, spent: dict[str, float]) -> None:
    """Wrap ``module.name`` so that its wall milliseconds add up in ``spent[name]``."""
    original = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + (time.perf_counter() - start) * 1e3

    setattr(module, name, wrapper)


def profile_side(path: Path, method: str, inputs: list[np.ndarray], n: int) -> dict[str, Any]:
    from pteforge.runtime import profile_run

    spent: dict[str, float] = {}
    for name in READ_BACK:
        _timed(profile_run, name, spent)
    start, cpu = time.perf_counter(), time.process_time()
    report = profile_run.profile_program(path, method, inputs, n)
    wall, cpu = (time.perf_counter() - start) * 1e3, (time.process_time() - cpu) * 1e3
    loads = report.load_ms.cold + report.load_ms.warm
    figures = {"wall": wall, "cpu": cpu, "loads": loads, "p50": report.latency_us.p50}
    return {**figures, "operator_runs": report.operator_runs, **spent}


def plain_side(path: Path, method: str, inputs: list[np.ndarray], n: int) -> dict[str, Any]:
    from executorch.runtime import Runtime

    from pteforge.runtime.instances import run_method

    start, cpu = time.perf_counter(), time.process_time()
    runtime = Runtime.get()  # outside the load, as profile_program's
    began = time.perf_counter()
    loaded = runtime.load_program(path).load_method(method)
    load = (time.perf_counter() - began) * 1e3
    run_method(loaded, inputs)  # the warm-up, as the profile's
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        run_method(loaded, inputs)
        samples.append((time.perf_counter() - began) * 1e6)
    wall, cpu = (time.perf_counter() - start) * 1e3, (time.process_time() - cpu) * 1e3
    return {"wall": wall, "cpu": cpu, "loads": load, "p50": float(np.percentile(samples, 50))}


def child(side: str, path: Path, method: str, n: int) -> None:
    """One side in this (fresh) process; prints its figures as JSON."""
    _preloaded()
    inputs = [np.asarray(a) for a in np.load(path.with_suffix(".npz")).values()]
    measure = profile_side if side == "profile" else plain_side
    print(json.dumps(measure(path, method, inputs, n)))


def _run_child(side: str, path: Path, method: str, n: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", side, str(path), method, str(n)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(path: Path, method: str, n: int, rounds: int) -> dict[str, Any]:
    """Median figures of each side over ``rounds`` pairs of fresh processes."""
    sides: dict[str, list[dict[str, Any]]] = {"profile": [], "plain": []}
    for index in range(rounds):
        order = ("profile", "plain") if index % 2 == 0 else ("plain", "profile")
        for side in order:
            sides[side].append(_run_child(side, path, method, n))
    return {
        side: {key: statistics.median(r.get(key, 0.0) for r in runs) for key in runs[0]}
        for side, runs in sides.items()
    }


def _row(name: str, n: int, figures: dict[str, Any]) -> str:
    p, r = figures["profile"], figures["plain"]
    overhead = (p["wall"] - p["loads"]) / (r["wall"] - r["loads"])
    rest = sum(p[key] for key in READ_BACK)
    return (
        f"| {name} | {n} | {p['wall']:.1f} | {p['loads']:.1f} | {r['wall']:.1f} | "
        f"{r['loads']:.1f} | {overhead:.3f}x | {rest:.2f} | {p['operator_runs']:g} | "
        f"{p['p50']:.1f} | {r['p50']:.1f} | {p['p50'] / r['p50']:.3f} | "
        f"{p['cpu'] / r['cpu']:.3f}x |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", default="200,100", help="N for the MLP, the encoder")
    args = parser.parse_args()
    from bench.runtime import build_workloads
    from bench.timing import single_threaded_workdir

    work = single_threaded_workdir("pteforge-bench-profile-")
    print("| workload | N | (p) wall ms | (p) loads ms | (r) wall ms | (r) load ms | "
          "(p - loads) / (r - load) | ETDump read + delegate table ms | runs read | "
          "(p) p50 us | (r) p50 us | p50 ratio | CPU (p) / (r) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    iterations = [int(x) for x in args.iterations.split(",")]
    for workload, n in zip(build_workloads(work), iterations, strict=True):
        np.savez(workload.path.with_suffix(".npz"), *workload.inputs)
        figures = compare(workload.path, workload.method, n, args.rounds)
        print(_row(workload.name, n, figures), flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], Path(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
        sys.exit(0)
    sys.exit(main())
