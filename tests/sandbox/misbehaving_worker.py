"""A worker that misbehaves on purpose (argv[1] picks how), to test the process boundary."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from pteforge.server.sandbox.worker_io import WorkerJob, worker_main


def _job(argv: list[str]) -> dict[str, Any]:
    mode = argv[0]
    if mode == "hog":
        blocks = [bytearray(64 * 1024 * 1024) for _ in range(1024)]  # 64 GiB if unbounded
        return {"blocks": len(blocks)}
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
        return {"env": dict(os.environ)}
    if mode == "chatty":
        print("library noise on stdout")
        return {"fine": True}
    raise ValueError(f"unknown mode {mode}")


JOB = WorkerJob(_job, failure_reason="job_failed")

if __name__ == "__main__":
    worker_main(JOB)
