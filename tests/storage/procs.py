"""Subprocess entry points for the multi-process storage tests.

``python -m tests.storage.procs work URL OUT GO``: claim jobs until the queue is empty, appending
each claimed job id to OUT; prints ``READY`` once connected, then waits for the file GO to exist
so that all workers start claiming together.
``python -m tests.storage.procs write URL SIZE SEED``: write deterministic content in 64 KiB
chunks committed one by one, print ``HALF`` half-way and block on stdin (to be SIGKILLed).
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from pteforge.storage import open_store
from pteforge.storage.ids import utc_now
from pteforge.storage.sql.blobs import SqlBlobStore

CHILD_CHUNK = 64 * 1024
WAIT_FOR_GO_S = 60.0


def content(size: int, seed: int) -> bytes:
    """The deterministic content both the writer child and the test compute."""
    return random.Random(seed).randbytes(size)


def work(url: str, out: Path, go: Path) -> None:
    store = open_store(url, migrate=False)
    worker_id = f"worker-{os.getpid()}"
    print("READY", flush=True)
    deadline = time.monotonic() + WAIT_FOR_GO_S
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.01)
    with out.open("a") as log:
        while True:
            with store.transaction() as tx:
                job = tx.jobs.claim_next(worker_id, timedelta(minutes=5))
            if job is None:
                break
            log.write(job.id + "\n")
            log.flush()
            with store.transaction() as tx:
                tx.jobs.succeed(job.id, worker_id, None)
    store.close()


def _paused_pieces(data: bytes) -> Iterator[bytes]:
    half = len(data) // 2
    for start in range(0, len(data), CHILD_CHUNK):
        if start == half:
            print("HALF", flush=True)
            sys.stdin.readline()  # blocks until the test kills us
        yield data[start : start + CHILD_CHUNK]


def write(url: str, size: int, seed: int) -> None:
    store = open_store(url, migrate=False)
    blobs = SqlBlobStore(store.engine, utc_now, chunk_size=CHILD_CHUNK, chunks_per_commit=1)
    blobs.write(_paused_pieces(content(size, seed)))


def main(argv: list[str]) -> None:
    if argv[0] == "work":
        work(argv[1], Path(argv[2]), Path(argv[3]))
    elif argv[0] == "write":
        write(argv[1], int(argv[2]), int(argv[3]))
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
