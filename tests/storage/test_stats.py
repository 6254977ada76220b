"""Aggregates for operations metrics: job counts, the queue's age, stage times, sizes."""

from __future__ import annotations

from datetime import timedelta

from pteforge.storage import JobStatus, SqlStore
from pteforge.storage.domain import StageTime, StoreSize
from tests.storage.conftest import ManualClock

LEASE = timedelta(seconds=30)
SECOND = timedelta(seconds=1)


def test_job_counts_and_the_oldest_queued_job(store: SqlStore, clock: ManualClock) -> None:
    with store.transaction() as tx:
        project = tx.projects.create("p")
        jobs = []
        for _ in range(3):
            jobs.append(tx.jobs.enqueue(project.id, "compile", {}))
            clock.advance(5 * SECOND)
        assert tx.stats.oldest_queued_at() == jobs[0].created_at
        tx.jobs.claim_next("w1", LEASE)
        tx.jobs.claim_next("w1", LEASE)
        tx.jobs.fail(jobs[1].id, "w1", "compile_failed", "boom")
    with store.transaction(read_only=True) as tx:
        assert tx.stats.oldest_queued_at() == jobs[2].created_at
        assert tx.stats.job_counts() == {
            (JobStatus.RUNNING, None): 1,
            (JobStatus.FAILED, "compile_failed"): 1,
            (JobStatus.QUEUED, None): 1,
        }


def test_stage_times_of_finished_jobs_with_a_retry(store: SqlStore, clock: ManualClock) -> None:
    with store.transaction() as tx:
        project = tx.projects.create("p")
        job = tx.jobs.enqueue(project.id, "compile", {})
    since = clock.now
    for worker, stages in (("w1", ["loading", "partition"]), ("w2", ["loading"])):
        clock.advance(2 * SECOND)
        with store.transaction() as tx:
            tx.jobs.claim_next(worker, LEASE)
            for stage in stages:
                clock.advance(SECOND)
                tx.jobs.set_stage(job.id, worker, stage)
        clock.advance(LEASE * 2 if worker == "w1" else 3 * SECOND)
        with store.transaction() as tx:
            if worker == "w1":
                tx.jobs.reap_expired()
            else:
                tx.jobs.succeed(job.id, worker, None)
    with store.transaction(read_only=True) as tx:
        times = tx.stats.stage_times(since)
        assert tx.stats.stage_times(clock.now + SECOND) == []
    lease = (LEASE * 2).total_seconds()
    assert sorted(times, key=repr) == sorted(
        [
            StageTime("queued", "succeeded", 2.0),
            StageTime("claimed", "retried", 1.0),
            StageTime("loading", "retried", 1.0),
            StageTime("partition", "retried", lease),
            StageTime("queued", "succeeded", 2.0),
            StageTime("claimed", "succeeded", 1.0),
            StageTime("loading", "succeeded", 3.0),
        ],
        key=repr,
    )


def test_sizes_count_rows_and_content_bytes(store: SqlStore) -> None:
    store.blobs.write([b"x" * 5000])
    with store.transaction() as tx:
        project = tx.projects.create("p")
        tx.jobs.enqueue(project.id, "compile", {})
    with store.transaction(read_only=True) as tx:
        sizes = {size.kind: size for size in tx.stats.sizes()}
    assert sizes["content"] == StoreSize("content", 1, 5000)
    assert sizes["programs"] == StoreSize("programs", 0, 0)
    assert sizes["artifacts"] == StoreSize("artifacts", 0, 0)
    assert (sizes["jobs"].count, sizes["job_events"].count) == (1, 1)
