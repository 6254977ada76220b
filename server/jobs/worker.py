"""A compile worker process (:mod:`compile_workers` starts it; ``main`` is its entry point).

It claims ``compile`` jobs from storage (so any number of workers, on any machine that
reaches the database, share the queue), lowers each in a disposable child process and
stores the result. A heartbeat thread keeps it visible and its job's lease alive, and
requeues the jobs of workers that went silent (:mod:`heartbeat`). It exits when its parent
(``pteforge serve`` or ``pteforge worker``) dies, handing its job back to the queue.

An idle worker is woken at once when a job is queued: on PostgreSQL by a ``NOTIFY`` from any
machine (:mod:`notify`; it then polls only every ``worker_fallback_poll_seconds``), on SQLite
by SIGUSR1 from the local server (and it polls every ``worker_poll_seconds``). A cancel
interrupts the running job's lowering at once the same ways (a notification, or SIGUSR2).

Each job runs in a temporary directory inside the worker's own scratch directory
(:mod:`scratch`), which nothing can leak: a killed worker's is removed by the next worker
that starts or collects garbage on the machine. A stopping worker hands its job back without
using one of the job's attempts; a job whose lowering process was killed is retried at once.
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

from pteforge.children.identity import hand_to_children
from pteforge.contracts.errors import ErrorCode
from pteforge.contracts.jobs import PROFILE_KIND
from pteforge.server.jobs.compile_job import COMPILE_KIND, CompileJobRunner
from pteforge.server.jobs.compile_workers import handle_signals_on_a_thread
from pteforge.server.jobs.heartbeat import WorkerHeartbeat
from pteforge.server.jobs.notify import JobNotifications, notifications_for
from pteforge.server.jobs.scratch import WorkerScratch, sweep
from pteforge.server.settings import Settings
from pteforge.server.startup.database import database_url, open_service_store
from pteforge.storage.domain import Job
from pteforge.storage.errors import LeaseLostError, StorageError
from pteforge.storage.store import Store

log = logging.getLogger("pteforge.worker")

JOB_KINDS = [COMPILE_KIND, PROFILE_KIND]
"""The kinds of job a worker claims; both run in its standby lowering child."""


class Worker:
    """The claim loop of one worker process."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.settings = settings
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{name}"
        self.stop = threading.Event()
        self.wake = threading.Event()  # a job was queued, or the worker is stopping
        self.interrupt = threading.Event()  # the running job's cancel may have been requested
        self._current: str | None = None  # the id of the job being run
        self._parent = os.getppid()
        self._next_gc = time.monotonic()

    def _parent_alive(self) -> bool:
        return os.getppid() == self._parent

    def should_stop(self) -> bool:
        return self.stop.is_set() or not self._parent_alive()

    def on_cancel(self, job_id: str | None = None) -> None:
        """A cancel was requested for ``job_id`` (None: some job): if it may be ours, the
        lowering loop checks now instead of at its next heartbeat."""
        if self._current is not None and job_id in (None, self._current):
            self.interrupt.set()

    def run(self) -> None:
        """Claim and run jobs until stopped, in a scratch directory of this process's own
        (removed when it stops; if it is killed, by the next worker's sweep)."""
        scratch = WorkerScratch.claim(self.scratch_parent)
        try:
            self._sweep_scratch()  # what workers killed earlier left behind
            self._run(open_service_store(self.settings, migrate=False), scratch.path)
        finally:
            scratch.close()

    @property
    def scratch_parent(self) -> Path:
        """Where every worker of this home has its own scratch directory."""
        return self.settings.home / "work"

    def _run(self, store: Store, scratch_root: Path) -> None:
        runner = CompileJobRunner(
            store,
            self.settings,
            self.worker_id,
            self.should_stop,
            self.interrupt,
            scratch_root=scratch_root,
        )
        heartbeat = WorkerHeartbeat(
            store, self.worker_id, self.settings.heartbeat_seconds, self.settings.job_lease_seconds
        )
        heartbeat.start()
        listener = notifications_for(database_url(self.settings), self.wake.set, self.on_cancel)
        if listener is not None:
            listener.start()
        try:
            self._loop(store, runner, listener, scratch_root)
        finally:
            if listener is not None:
                listener.stop()
            runner.close()
            heartbeat.stop()
            store.close()

    def _loop(
        self,
        store: Store,
        runner: CompileJobRunner,
        listener: JobNotifications | None,
        scratch_root: Path,
    ) -> None:
        lease = timedelta(seconds=self.settings.job_lease_seconds)
        while not self.should_stop():
            self._maybe_collect_garbage(store)
            self.wake.clear()  # a wake-up from now on is for a job this claim may miss
            with store.transaction() as tx:
                job = tx.jobs.claim_next(self.worker_id, lease, kinds=JOB_KINDS)
            if job is None:
                runner.prepare()  # the standby for the next job warms up while idle
                self.wake.wait(self._poll_seconds(listener))
                continue
            self._run_one(runner, job, scratch_root)
            if self.should_stop():
                self._release(store, job)

    def _poll_seconds(self, listener: JobNotifications | None) -> float:
        if listener is not None and listener.listening:
            return self.settings.worker_fallback_poll_seconds
        return self.settings.worker_poll_seconds

    def _release(self, store: Store, job: Job) -> None:
        """Stopping mid-job: hand the job back now rather than when its lease runs out."""
        why = "was stopped" if self.stop.is_set() else "lost its parent process"
        try:
            with store.transaction() as tx:
                released = tx.jobs.release(job.id, self.worker_id, f"worker {self.worker_id} {why}")
        except StorageError as exc:  # the lease runs out and a heartbeat requeues it instead
            log.warning("job %s: could not hand back: %s", job.id, exc)
            return
        if released is not None:
            log.info("job %s handed back: %s", job.id, released.status.value)

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
        self._sweep_scratch()

    def _sweep_scratch(self) -> None:
        """Remove the scratch directories of workers that are gone (killed mid-job)."""
        for path in sweep(self.scratch_parent):
            log.info("removed the scratch directory %s of a worker that is gone", path)

    def _run_one(self, runner: CompileJobRunner, job: Job, scratch_root: Path) -> None:
        log.info("job %s claimed (attempt %d)", job.id, job.attempts)
        self.interrupt.clear()
        self._current = job.id
        try:
            with tempfile.TemporaryDirectory(dir=scratch_root) as scratch:
                hand_to_children(Path(scratch))  # the lowering child writes its .pte here
                runner.run(job, Path(scratch))
        except LeaseLostError:
            log.warning("job %s: lease lost; another worker or the reaper owns it", job.id)
        except Exception as exc:  # a bug here must fail the job, not the worker
            log.exception("job %s: worker error", job.id)
            runner.fail_quietly(job, ErrorCode.INTERNAL_ERROR, f"worker error: {exc!r}")
        finally:
            self._current = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pteforge-worker")
    parser.add_argument("--name", default="w0")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    worker = Worker(Settings(), args.name)

    def stop() -> None:
        worker.stop.set()
        worker.wake.set()
        worker.interrupt.set()  # a running lowering stops now, not at its next heartbeat

    handle_signals_on_a_thread(
        {
            signal.SIGTERM: stop,
            signal.SIGINT: stop,
            signal.SIGUSR1: worker.wake.set,
            signal.SIGUSR2: worker.on_cancel,
        }
    )
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
