"""What confinement costs a compile: the lowering child of this tree against another tree's.

A compile worker hands each job to a warm standby lowering child. This measures that path
(``StandbyLowering`` + ``run_lowering``, warm-up on, the job timed from hand-over to result)
on ``bench/compile.py``'s encoder/decoder, in this tree and in a baseline tree (a checkout
from before confinement, e.g. ``git worktree add /tmp/pf-old f5d0d78``), alternating the
trees per round, each round in fresh processes. Prints medians and the ratio this/baseline.

    .venv/bin/python bench/confinement.py --baseline /tmp/pf-old [--rounds 3] [--jobs 2]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
PLANS = {
    "portable": {"all": {}},
    "xnnpack": {"all": {"partitioners": ["xnnpack"]}},
}


def _one_process(jobs: int) -> dict[str, list[float]]:
    """In the tree on ``PYTHONPATH``: lower each plan ``jobs`` times through standbys."""
    import torch

    from bench.compile import workload
    from pteforge.contracts.jobs import LoweringRequest
    from pteforge.server.jobs.runner import (
        StandbyLowering,
        Verdict,
        Watch,
        lowering_context,
        run_lowering,
    )
    from pteforge.server.programs.bundle import write_bundle

    ctx = lowering_context()
    seconds: dict[str, list[float]] = {name: [] for name in PLANS}
    with tempfile.TemporaryDirectory(prefix="pteforge-bench-") as tmp:
        scratch = Path(tmp)
        files = {}
        for method, program in workload().items():
            files[method] = scratch / f"{method}.pt2"
            torch.export.save(program, files[method])
        write_bundle(files, scratch / "program.pt2")
        takes_scratch = "scratch" in inspect.signature(StandbyLowering.start).parameters
        for _ in range(jobs):
            for name, plan in PLANS.items():
                extra = {"scratch": scratch} if takes_scratch else {}
                standby = StandbyLowering.start(ctx, True, **extra)
                _await_warm(standby)
                request = LoweringRequest(
                    program_path=str(scratch / "program.pt2"),
                    plan=plan,
                    output_path=str(scratch / "out.pte"),
                    memory_limit_bytes=None,
                )
                watch = Watch(1.0, 600, lambda: Verdict.CONTINUE, lambda _: None)
                start = time.perf_counter()
                outcome, _ = run_lowering(standby, request, watch)
                seconds[name].append(time.perf_counter() - start)
                assert outcome.result is not None, outcome.error_message
    return seconds


def _await_warm(standby: Any, deadline_s: float = 120.0) -> None:
    """Wait (polling its CPU time) until the standby has warmed up and sits idle, as it
    would in an idle worker, so the job is timed warm in both trees."""
    stat = Path(f"/proc/{standby.process.pid}/stat")
    last, quiet, deadline = -1, 0, time.monotonic() + deadline_s
    while quiet < 3 and time.monotonic() < deadline:
        fields = stat.read_text().rpartition(")")[2].split()
        ticks = int(fields[11]) + int(fields[12])
        quiet = quiet + 1 if ticks == last and ticks > 0 else 0
        last = ticks
        time.sleep(0.2)


def _run_tree(tree: Path, jobs: int) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(HERE / "bench" / "confinement.py"), "--one", str(jobs)]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one_process(args.one)))
        return
    trees = {"confined": HERE, "baseline": args.baseline.resolve()}
    samples: dict[str, dict[str, list[float]]] = {t: {p: [] for p in PLANS} for t in trees}
    for index in range(args.rounds):
        order = list(trees) if index % 2 == 0 else list(reversed(trees))
        for tree in order:
            for plan, values in _run_tree(trees[tree], args.jobs).items():
                samples[tree][plan].extend(values)
    print(f"rounds: {args.rounds} x {args.jobs} jobs per plan (medians, seconds)\n")
    print("| plan | confined | baseline | ratio |\n|---|---|---|---|")
    for plan in PLANS:
        ours, base = (statistics.median(samples[t][plan]) for t in ("confined", "baseline"))
        print(f"| {plan} | {ours:.2f} | {base:.2f} | {ours / base:.3f} |")


if __name__ == "__main__":
    main()
