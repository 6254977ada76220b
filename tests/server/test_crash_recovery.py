"""Crash recovery of compile jobs on the package's real server (one compile worker):

- a lowering process killed mid-job (as the OOM killer would) has its job requeued by its own
  worker within 2 s, with the reason, and the next attempt succeeds;
- a worker stopped with SIGTERM hands its job back without using one of its attempts;
- a worker killed with SIGKILL mid-job leaves its scratch directory (the job's program copy)
  only until the worker that replaces it starts, which never touches a live one's.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from pteforge.server.jobs.scratch import WorkerScratch
from tests.server.helpers import job_state, read_events, submit, wait_job
from tests.server.service import ServiceProcess, process_table, wait_until

REQUEUE_WITHIN_S = 2.0  # issue 18: a killed lowering process's job is back this fast
POLL_S = 0.02


def _plan(rtol: float) -> dict[str, Any]:
    """A portable plan no other test compiles (its own tolerance), so the job really lowers."""
    return {"all": {}, "verify": {"rtol": rtol}}


def _proc_stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...)."""
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    return [child for child, (ppid, _) in process_table().items() if ppid == pid]


def _lowering_process(worker: int) -> int | None:
    """The newest child of the worker's fork server: the lowering process of its job."""
    for child in _children(worker):
        if b"forkserver" in (Path("/proc") / str(child) / "cmdline").read_bytes():
            lowering = _children(child)
            return max(lowering, key=lambda p: int(_proc_stat(p)[19])) if lowering else None
    return None


def _gone(pid: int) -> bool:
    try:
        return _proc_stat(pid)[0] == "Z"
    except FileNotFoundError:
        return True


def _lowering(client: httpx.Client, program: dict[str, Any], plan: dict[str, Any]) -> Any:
    """Submit ``plan`` on ``program`` and wait until its lowering has started."""
    return _lowering_again(client, submit(client, program["id"], plan)["id"], attempt=1)


def _lowering_again(client: httpx.Client, job_id: str, attempt: int) -> Any:
    """Wait until the job's attempt ``attempt`` has started lowering."""

    def started() -> Any:
        job = job_state(client, job_id)
        assert job["status"] in {"queued", "running"} and job["attempt"] <= attempt, job
        return job if (job["stage"], job["attempt"]) == ("to_edge", attempt) else None

    return wait_until(started, 240, f"job {job_id} to reach to_edge", every=POLL_S)


def _kill_lowering(service: ServiceProcess) -> float:
    """SIGKILL the lowering process of the worker's job; returns when (monotonic)."""
    child = wait_until(lambda: _lowering_process(_the_worker(service)), 30, "lowering process")
    os.kill(child, signal.SIGKILL)
    return time.monotonic()


def _the_worker(service: ServiceProcess) -> int:
    (worker,) = wait_until(service.worker_pids, 60, "the compile worker")
    return int(worker)


def _attempts(client: httpx.Client, job_id: str) -> list[tuple[str, int]]:
    """(status, attempt) of each change of the (finished) job, in order, repeats merged."""
    changes = [(d["status"], d["attempt"]) for e, d in read_events(client, job_id) if e == "job"]
    return [c for i, c in enumerate(changes) if i == 0 or changes[i - 1] != c]


def test_a_killed_lowering_process_is_retried_at_once_with_its_reason(
    service: ServiceProcess, admin: httpx.Client, seq2seq_program: dict[str, Any]
) -> None:
    job = _lowering(admin, seq2seq_program, _plan(1.1e-4))
    killed = _kill_lowering(service)
    requeued = wait_until(
        lambda: (j := job_state(admin, job["id"]))["retry_reason"] and j,
        30,
        "the job's retry reason",
        every=POLL_S,
    )
    seconds = time.monotonic() - killed
    assert seconds < REQUEUE_WITHIN_S, f"requeued {seconds:.2f}s after the kill"
    assert requeued["retry_reason"] == (
        "attempt 1 of 3 abandoned: the lowering process died with SIGKILL (likely out of memory)"
    )
    assert requeued["error"] is None and requeued["status"] in {"queued", "running"}
    done = wait_job(admin, job["id"])
    assert done["status"] == "succeeded" and done["attempt"] == 2, done
    assert done["retry_reason"] == requeued["retry_reason"]
    assert _attempts(admin, job["id"])[:3] == [("queued", 0), ("running", 1), ("queued", 1)]


def test_a_job_whose_lowering_is_killed_at_every_attempt_fails_naming_the_signal(
    service: ServiceProcess, admin: httpx.Client, seq2seq_program: dict[str, Any]
) -> None:
    job = _lowering(admin, seq2seq_program, _plan(1.4e-4))
    for attempt in (1, 2, 3):
        _lowering_again(admin, job["id"], attempt)
        _kill_lowering(service)
    done = wait_job(admin, job["id"])
    assert done["status"] == "failed" and done["attempt"] == 3, done
    assert done["error"] == {
        "code": "compile_crashed",
        "message": "the lowering process died with SIGKILL (likely out of memory); "
        "the job used all 3 attempts",
    }
    assert done["retry_reason"].startswith("attempt 2 of 3 abandoned: ")


def test_a_stopped_worker_hands_its_job_back_without_using_an_attempt(
    service: ServiceProcess, admin: httpx.Client, seq2seq_program: dict[str, Any]
) -> None:
    job = _lowering(admin, seq2seq_program, _plan(1.2e-4))
    assert job["attempt"] == 1
    worker = _the_worker(service)
    os.kill(worker, signal.SIGTERM)
    handed = wait_until(
        lambda: (j := job_state(admin, job["id"]))["retry_reason"] and j, 30, "the hand-back"
    )
    assert handed["retry_reason"].startswith("attempt 1 of 3 handed back (not counted): worker ")
    assert handed["retry_reason"].endswith(f":{worker}:w0 was stopped")
    assert handed["attempt"] == (0 if handed["status"] == "queued" else 1), handed
    wait_until(lambda: _gone(worker), 30, "the stopped worker to exit")
    assert list((service.home / "work").glob(f"worker-{worker}-*")) == []  # removed its own
    done = wait_job(admin, job["id"])
    assert done["status"] == "succeeded" and done["attempt"] == 1, done
    assert _attempts(admin, job["id"]) == [
        ("queued", 0), ("running", 1), ("queued", 0), ("running", 1), ("succeeded", 1),
    ]  # fmt: skip


def test_a_killed_workers_scratch_is_removed_by_the_worker_replacing_it(
    service: ServiceProcess, admin: httpx.Client, seq2seq_program: dict[str, Any]
) -> None:
    live = WorkerScratch.claim(service.home / "work")  # another live worker's: kept
    try:
        job = _lowering(admin, seq2seq_program, _plan(1.3e-4))
        worker = _the_worker(service)
        (left,) = (service.home / "work").glob(f"worker-{worker}-*")
        assert [p.name for p in left.glob("*/program.pt2")] == ["program.pt2"]
        os.kill(worker, signal.SIGKILL)
        wait_until(lambda: not left.exists(), 120, "the killed worker's scratch to be removed")
        successor = _the_worker(service)
        assert successor != worker
        assert len(list((service.home / "work").glob(f"worker-{successor}-*"))) == 1
        assert live.path.is_dir()
    finally:
        live.close()
    done = wait_job(admin, job["id"])  # requeued once the killed worker's lease ran out
    assert done["status"] == "succeeded" and done["attempt"] == 2, done
