"""A worker that misbehaves on purpose (argv[1] picks how), to test the process boundary."""

from __future__ import annotations

import os
import signal
import sys
import time

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

from pteforge.contracts.specs import JsonForm
from pteforge.server.sandbox.worker_io import WorkerJob, worker_main


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class Answer(JsonForm):
    """What the well-behaved modes answer (fields that are None are left out)."""

    blocks: int | None = None
    env: dict[str, str] | None = None
    fine: bool | None = None


def _job(argv: list[str]) -> Answer:
    mode = argv[0]
    if mode == "hog":
        blocks = [bytearray(64 * 1024 * 1024) for _ in range(1024)]  # 64 GiB if unbounded
        return Answer(blocks=len(blocks))
    if mode == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "hang":
        time.sleep(3600)
    if mode == "spin":
        while True:
            pass
    if mode == "exit":
        sys.stdout.flush()
        os._exit(7)
    if mode == "env":
        return Answer(env=dict(os.environ))
    if mode == "chatty":
        print("library noise on stdout")
        return Answer(fine=True)
    raise ValueError(f"unknown mode {mode}")


JOB = WorkerJob(_job, failure_reason="job_failed")

if __name__ == "__main__":
    worker_main(JOB)
