"""The heartbeat thread of a compile worker process.

Every ``heartbeat_seconds`` it records the worker as alive, which also extends the lease of
the job it holds, then requeues the jobs of workers that went silent for longer than the
heartbeat timeout (``job_lease_seconds``) and forgets those workers. Any live worker does
it, so a job whose worker died (``kill -9``, a lost machine) goes back to the queue within
one heartbeat of its lease running out, with the reason recorded on the job.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import timedelta

from pteforge.storage.errors import StorageError
from pteforge.storage.store import Store

log = logging.getLogger(__name__)


class WorkerHeartbeat:
    """Beats for ``worker_id`` on its own thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, store: Store, worker_id: str, every: float, timeout: float) -> None:
        self.store = store
        self.worker_id = worker_id
        self.every = every
        self.timeout = timedelta(seconds=timeout)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)

    def start(self) -> None:
        """Beat once now (the worker shows up at once), then on the thread."""
        self.beat()
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and remove the worker's row: it stopped on purpose."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        try:
            with self.store.transaction() as tx:
                tx.workers.remove(self.worker_id)
        except StorageError as exc:  # it will be forgotten once silent for the timeout
            log.warning("could not remove worker %s: %s", self.worker_id, exc)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.beat()

    def beat(self) -> None:
        """One heartbeat and one round of reaping; storage errors are logged, not raised
        (the next beat retries; the lease outlasts several missed beats)."""
        try:
            with self.store.transaction() as tx:
                tx.workers.beat(self.worker_id, socket.gethostname(), os.getpid(), self.timeout)
            with self.store.transaction() as tx:
                reaped = tx.jobs.reap_expired()
                silent = tx.workers.forget_silent(self.timeout)
        except StorageError as exc:
            log.warning("heartbeat of worker %s failed: %s", self.worker_id, exc)
            return
        for job in reaped:
            log.warning("job %s: %s -> %s", job.id, job.retry_reason or "", job.status.value)
        for worker in silent:
            log.warning("worker %s went silent; forgotten", worker)
