"""Operations metrics on ``/metrics``, read from the database: the job queue, job and stage
durations and outcomes, worker heartbeats and store sizes.

They describe the whole deployment (every replica reports the same figures: take one, or
the max, rather than a sum). A scrape never waits for the database: it reads a snapshot that
a thread refreshes when the last one is older than ``refresh_s``. Labels carry fixed
vocabularies only (statuses, stage names, error codes, kinds) and worker ids (host, pid):
never a project's, job's, program's or artifact's identifier.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from prometheus_client.core import GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pteforge.storage.domain import JobStatus, StageTime, StoreSize, WorkerBeat
from pteforge.storage.errors import StorageError
from pteforge.storage.ids import utc_now
from pteforge.storage.store import Store

log = logging.getLogger(__name__)

STAGE_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800)


@dataclass
class Snapshot:
    """What the database said at ``taken``."""

    taken: datetime
    counts: dict[tuple[JobStatus, str | None], int] = field(default_factory=dict)
    oldest_queued: datetime | None = None
    stages: list[StageTime] = field(default_factory=list)
    workers: list[WorkerBeat] = field(default_factory=list)
    sizes: list[StoreSize] = field(default_factory=list)


def take_snapshot(store: Store, window: timedelta, now: datetime) -> Snapshot:
    """Read every figure in one read-only transaction."""
    with store.transaction(read_only=True) as tx:
        return Snapshot(
            taken=now,
            counts=tx.stats.job_counts(),
            oldest_queued=tx.stats.oldest_queued_at(),
            stages=tx.stats.stage_times(now - window),
            workers=tx.workers.list(),
            sizes=tx.stats.sizes(),
        )


class OperationsCollector(Collector):
    """The Prometheus collector of these metrics, over a refreshed :class:`Snapshot`."""

    def __init__(
        self,
        store: Store,
        window_s: float = 3600.0,
        refresh_s: float = 5.0,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.store = store
        self.window = timedelta(seconds=window_s)
        self.refresh_s = refresh_s
        self.clock = clock
        self._snapshot: Snapshot | None = None
        self._refreshed = float("-inf")
        self._lock = threading.Lock()

    def refresh(self) -> None:
        """Read the database now (blocking: the app calls it once at start, off the loop)."""
        with self._lock:
            self._refresh()

    def _refresh(self) -> None:
        try:
            self._snapshot = take_snapshot(self.store, self.window, self.clock())
        except StorageError as exc:
            log.warning("operations metrics not refreshed: %s", exc)
        self._refreshed = time.monotonic()

    def _refresh_if_stale(self) -> None:
        if time.monotonic() - self._refreshed >= self.refresh_s and self._lock.acquire(False):
            threading.Thread(target=self._refresh_and_release, name="ops-metrics").start()

    def _refresh_and_release(self) -> None:
        try:
            self._refresh()
        finally:
            self._lock.release()

    def collect(self) -> Iterator[Metric]:
        self._refresh_if_stale()
        snapshot = self._snapshot
        if snapshot is None:
            return
        yield from _job_metrics(snapshot)
        yield from _stage_metrics(snapshot, self.window)
        yield from _worker_metrics(snapshot)
        yield from _store_metrics(snapshot)


def _job_metrics(snapshot: Snapshot) -> Iterator[Metric]:
    by_status = GaugeMetricFamily(
        "pteforge_jobs", "Jobs in the database by status (queued: the queue)", labels=["status"]
    )
    totals: dict[str, int] = defaultdict(int)
    failed = GaugeMetricFamily(
        "pteforge_jobs_failed", "Failed jobs kept, by error code", labels=["error_code"]
    )
    for (status, code), count in sorted(snapshot.counts.items(), key=str):
        totals[status.value] += count
        if status is JobStatus.FAILED:
            failed.add_metric([code or "unknown"], count)
    for status in JobStatus:
        by_status.add_metric([status.value], totals[status.value])
    yield by_status
    yield failed
    yield GaugeMetricFamily(
        "pteforge_job_queue_depth", "Queued jobs waiting for a worker", value=totals["queued"]
    )
    age = 0.0 if snapshot.oldest_queued is None else _seconds(snapshot, snapshot.oldest_queued)
    yield GaugeMetricFamily(
        "pteforge_job_queue_oldest_seconds", "How long the oldest queued job has waited", value=age
    )


def _stage_metrics(snapshot: Snapshot, window: timedelta) -> Iterator[Metric]:
    family = GaugeHistogramMetricFamily(
        "pteforge_job_stage_seconds",
        f"Time per stage of jobs that finished in the last {window.total_seconds():.0f}s, by "
        "stage and outcome (retried: an attempt abandoned when its worker stopped)",
        labels=["stage", "outcome"],
    )
    grouped: dict[tuple[str, str], list[float]] = defaultdict(list)
    for time_ in snapshot.stages:
        grouped[(time_.stage, time_.outcome)].append(time_.seconds)
    for (stage, outcome), samples in sorted(grouped.items()):
        buckets = [(str(le), sum(1 for s in samples if s <= le)) for le in STAGE_BUCKETS]
        buckets.append(("+Inf", len(samples)))
        family.add_metric([stage, outcome], buckets, gsum_value=sum(samples))
    yield family


def _worker_metrics(snapshot: Snapshot) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "pteforge_workers", "Compile workers heartbeating", value=len(snapshot.workers)
    )
    age = GaugeMetricFamily(
        "pteforge_worker_heartbeat_age_seconds",
        "Time since each worker's last heartbeat",
        labels=["worker"],
    )
    busy = GaugeMetricFamily(
        "pteforge_worker_busy", "1 while the worker runs a job", labels=["worker"]
    )
    for worker in snapshot.workers:
        age.add_metric([worker.id], _seconds(snapshot, worker.heartbeat_at))
        busy.add_metric([worker.id], int(worker.job_id is not None))
    yield age
    yield busy


def _store_metrics(snapshot: Snapshot) -> Iterator[Metric]:
    rows = GaugeMetricFamily("pteforge_store_rows", "Rows of the store by kind", labels=["kind"])
    size = GaugeMetricFamily(
        "pteforge_store_bytes",
        "Bytes by kind (content: deduplicated, as stored; programs and artifacts: as listed)",
        labels=["kind"],
    )
    for item in snapshot.sizes:
        rows.add_metric([item.kind], item.count)
        if item.kind in ("content", "programs", "artifacts"):
            size.add_metric([item.kind], item.bytes)
    yield rows
    yield size


def _seconds(snapshot: Snapshot, since: datetime) -> float:
    return max(0.0, (snapshot.taken - since).total_seconds())
