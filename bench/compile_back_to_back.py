"""Compiles sent back to back against one sent to an idle, warm worker (issue 20).

A real ``pteforge serve`` (one compile worker, the compile warm-up on as in production)
compiles a small two-layer MLP, so the figures measure the per-job overhead, not the lowering.
Each round, once the worker is idle and its lowering process is warm:

1. ``first``: one job, waited for;
2. ``second`` and ``third``: each submitted as soon as the previous one succeeded;
3. after the worker is idle and warm again, a ``burst`` of three submitted at once.

Every job lowers a program of its own (a fresh seed), so none is answered from an earlier
artifact. Printed per job: seconds from submit to succeeded by the server's clock
(``finished_at - created_at``), its own turn (from the later of its submit and the previous
job's end: a burst's jobs queue behind each other on the one worker), submit to seen
succeeded by the client, and the ratio of its turn to ``first``'s in the same round (target:
the second and third within 1.2x of the first). Then the resident (RSS) and proportional
(PSS) memory of the server's processes.

    .venv/bin/python bench/compile_back_to_back.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.service import wait_for_standbys
from tests.models import MLP, export_methods, save_programs
from tests.server.helpers import TERMINAL, job_state, submit, upload_methods
from tests.server.service import (
    BENCH_ENV,
    ServiceProcess,
    process_table,
    running_service,
    wait_until,
)

PLAN = {"methods": {"forward": {"partitioners": ["xnnpack"]}}}


def upload_mlps(client: httpx.Client, work: Path, count: int, seed: int) -> list[str]:
    """``count`` two-layer MLPs with different weights, uploaded; their program ids."""
    ids = []
    for i in range(count):
        torch.manual_seed(seed + i)
        programs = export_methods(MLP(), {"forward": (torch.randn(1, 16),)}).programs
        files = save_programs(programs, work / f"mlp-{seed + i}")
        ids.append(upload_methods(client, files, name=f"mlp-{seed + i}")["id"])
    return ids


def wait_idle_and_warm(svc: ServiceProcess, jobs_done: int) -> None:
    """Until every job finished and a lowering process newer than the last job is ready."""
    wait_for_standbys(svc, jobs_done, timeout=600)
    time.sleep(1.0)  # let the worker settle into its idle wait


def finish(client: httpx.Client, job_id: str) -> tuple[dict[str, Any], float]:
    """Poll ``job_id`` until it ends; the job and the client's clock when it was seen ended."""

    def ended() -> Any:
        job = job_state(client, job_id)
        return job if job["status"] in TERMINAL else None

    job = wait_until(ended, 600, f"job {job_id}", every=0.02)
    assert job["status"] == "succeeded", job
    return job, time.perf_counter()


@dataclass
class Timing:
    """One job's seconds: submit to succeeded by the server's clock; its own turn (from the
    later of its submit and the previous job's end); submit to seen succeeded by the client."""

    total: float
    turn: float
    client: float


def stamps(job: dict[str, Any]) -> tuple[datetime, datetime]:
    """When the server queued the job and when it succeeded."""
    return datetime.fromisoformat(job["created_at"]), datetime.fromisoformat(job["finished_at"])


def timed(client: httpx.Client, ids: list[str], start: float) -> list[Timing]:
    """Wait for each of ``ids`` in turn; its times (``start``: the client's first submit)."""
    timings: list[Timing] = []
    previous_end: datetime | None = None
    for job_id in ids:
        job, seen = finish(client, job_id)
        created, ended = stamps(job)
        turn_start = created if previous_end is None else max(created, previous_end)
        timings.append(
            Timing(
                (ended - created).total_seconds(), (ended - turn_start).total_seconds(),
                seen - start,
            )
        )  # fmt: skip
        previous_end = ended
    return timings


def one_by_one(client: httpx.Client, programs: list[str]) -> list[Timing]:
    """Each job submitted as soon as the previous one was seen succeeded."""
    timings = []
    for program in programs:
        start = time.perf_counter()
        timings += timed(client, [submit(client, program, PLAN)["id"]], start)
    return timings


def burst(client: httpx.Client, programs: list[str]) -> list[Timing]:
    """All jobs submitted at once, then waited for."""
    start = time.perf_counter()
    return timed(client, [submit(client, program, PLAN)["id"] for program in programs], start)


def print_rows(round_no: int, names: list[str], timings: list[Timing], first: float) -> None:
    for name, t in zip(names, timings, strict=True):
        print(
            f"| {round_no} | {name} | {t.total:.2f} | {t.turn:.2f} | {t.client:.2f} "
            f"| {t.turn / first:.2f}x |",
            flush=True,
        )


def run_round(svc: ServiceProcess, client: httpx.Client, work: Path, round_no: int) -> None:
    """One round: first, second, third, then a burst of three, on fresh programs."""
    programs = upload_mlps(client, work, 6, seed=100 * round_no)
    jobs_done = 6 * round_no
    wait_idle_and_warm(svc, jobs_done)
    sequential = one_by_one(client, programs[:3])
    wait_idle_and_warm(svc, jobs_done + 3)
    together = burst(client, programs[3:])
    first = sequential[0].turn
    print_rows(round_no, ["first", "second", "third"], sequential, first)
    print_rows(round_no, ["burst 1", "burst 2", "burst 3"], together, first)


def memory_report(svc: ServiceProcess) -> None:
    """Resident and proportional memory of the server's descendant processes, in MiB."""
    assert svc.proc is not None
    table = process_table()
    for pid in descendants(table, svc.proc.pid):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
        except OSError:  # gone meanwhile
            continue
        fields = dict(line.split(":", 1) for line in rollup)
        rss, pss = (int(fields[k].split()[0]) / 1024 for k in ("Rss", "Pss"))
        cmd = table[pid][1].replace(b"\0", b" ").decode()
        print(f"| {pid} | {table[pid][0]} | {cmd[:70]} | {rss:.0f} | {pss:.0f} |")


def descendants(table: dict[int, tuple[int, bytes]], pid: int) -> list[int]:
    """``pid``'s child processes, recursively (``table``: ``process_table()``)."""
    found = []
    for child, (parent, _) in sorted(table.items()):
        if parent == pid:
            found += [child, *descendants(table, child)]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pteforge-b2b-"))
    env = {**BENCH_ENV, "PTEFORGE_COMPILE_WARMUP": "true"}  # as `pteforge serve` runs
    with running_service(work / "home", env, timeout=600) as svc:
        assert svc.admin_token
        with svc.client(svc.admin_token, timeout=600) as client:
            print("| round | job | submit to succeeded s | own turn s | client s | turn / first |")
            print("|---|---|---|---|---|---|")
            for round_no in range(args.rounds):
                run_round(svc, client, work, round_no)
        print("\n| pid | parent | process | RSS MiB | PSS MiB |\n|---|---|---|---|---|")
        memory_report(svc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
