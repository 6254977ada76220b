"""A compile worker process: ``python -m pteforge.server.jobs.worker``.

It claims ``compile`` jobs from storage (so any number of workers, on any machine that
reaches the database, share the queue), lowers each in a disposable child process and
stores the result. It exits when its parent server dies, so a killed server never leaves
workers holding leases; those leases expire and are reaped by the next worker. An idle worker
polls the queue every ``worker_poll_seconds``; the local server also wakes it at once with
SIGUSR1 when it queues a job.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

from pteforge.server.jobs.compile_job import COMPILE_KIND, CompileJobRunner
from pteforge.server.settings import Settings
from pteforge.server.store import open_service_store
from pteforge.storage.domain import Job
from pteforge.storage.errors import LeaseLostError, StorageError
from pteforge.storage.store import Store

log = logging.getLogger("pteforge.worker")


class Worker:
    """The claim loop of one worker process."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.settings = settings
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{name}"
        self.stop = threading.Event()
        self.wake = threading.Event()  # set by SIGUSR1 (a job was queued) or on stop
        self._parent = os.getppid()
        self._next_gc = time.monotonic()

    def _parent_alive(self) -> bool:
        return os.getppid() == self._parent

    def should_stop(self) -> bool:
        return self.stop.is_set() or not self._parent_alive()

    def run(self) -> None:
        store = open_service_store(self.settings, migrate=False)
        scratch_root = self.settings.home / "work"
        scratch_root.mkdir(parents=True, exist_ok=True)
        runner = CompileJobRunner(store, self.settings, self.worker_id, self.should_stop)
        lease = timedelta(seconds=self.settings.job_lease_seconds)
        try:
            while not self.should_stop():
                self._maybe_collect_garbage(store)
                with store.transaction() as tx:
                    for reaped in tx.jobs.reap_expired():
                        log.warning("job %s lease expired: now %s", reaped.id, reaped.status)
                    job = tx.jobs.claim_next(self.worker_id, lease, kinds=[COMPILE_KIND])
                if job is None:
                    runner.prepare()  # the standby for the next job warms up while idle
                    self.wake.wait(self.settings.worker_poll_seconds)
                    self.wake.clear()
                    continue
                self._run_one(runner, job, scratch_root)
        finally:
            runner.close()
            store.close()

    def _maybe_collect_garbage(self, store: Store) -> None:
        """Every ``blob_gc_interval_seconds``: delete jobs past their retention, then remove
        abandoned uploads (a writer killed mid-write) and content no row references once
        they are older than the grace period. Any worker may do it; it is idempotent."""
        if time.monotonic() < self._next_gc:
            return
        self._next_gc = time.monotonic() + self.settings.blob_gc_interval_seconds
        try:
            with store.transaction() as tx:
                jobs = tx.jobs.delete_finished(
                    timedelta(seconds=self.settings.job_retention_seconds)
                )
            removed = store.blobs.collect_garbage(
                timedelta(seconds=self.settings.blob_gc_grace_seconds)
            )
        except StorageError as exc:  # e.g. two workers collecting at once: the next round retries
            log.warning("garbage collection skipped: %s", exc)
            return
        if jobs or removed:
            log.info("garbage collection: %d finished jobs, %d unreferenced items", jobs, removed)

    def _run_one(self, runner: CompileJobRunner, job: Job, scratch_root: Path) -> None:
        log.info("job %s claimed", job.id)
        try:
            with tempfile.TemporaryDirectory(dir=scratch_root) as scratch:
                runner.run(job, Path(scratch))
        except LeaseLostError:
            log.warning("job %s: lease lost; another worker or the reaper owns it", job.id)
        except Exception as exc:  # a bug here must fail the job, not the worker
            log.exception("job %s: worker error", job.id)
            runner.fail_quietly(job, "internal_error", f"worker error: {exc!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pteforge-worker")
    parser.add_argument("--name", default="w0")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    worker = Worker(Settings(), args.name)

    def stop(*_: object) -> None:
        worker.stop.set()
        worker.wake.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGUSR1, lambda *_: worker.wake.set())
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
