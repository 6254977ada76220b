"""Worker heartbeats, retries with their reason and attempt, and PostgreSQL notifications."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from pteforge.storage import Job, JobStatus, LeaseLostError, SqlStore
from pteforge.storage.notifications import JOB_CANCEL_CHANNEL, JOB_QUEUED_CHANNEL
from tests.storage.conftest import ManualClock
from tests.storage.legacy import current_store, insert_old_job, schema_at

LEASE = timedelta(seconds=30)


def _enqueue(store: SqlStore, max_attempts: int = 3) -> list[Job]:
    with store.transaction() as tx:
        project = tx.projects.get_or_create("p")
        return [tx.jobs.enqueue(project.id, "compile", {}, max_attempts)]


def _claim(store: SqlStore, worker: str) -> Job | None:
    with store.transaction() as tx:
        return tx.jobs.claim_next(worker, LEASE)


def test_worker_heartbeats_keep_the_leases_of_its_jobs(store: SqlStore, clock: ManualClock) -> None:
    (job,) = _enqueue(store, max_attempts=3)
    _claim(store, "w1")
    for _ in range(3):  # three leases long, kept alive by the worker's heartbeat alone
        clock.advance(LEASE / 2)
        with store.transaction() as tx:
            tx.workers.beat("w1", "host-a", 11, LEASE)
            assert tx.jobs.reap_expired() == []
    with store.transaction() as tx:
        (beat,) = tx.workers.list()
    assert (beat.id, beat.host, beat.pid, beat.job_id) == ("w1", "host-a", 11, job.id)
    assert beat.heartbeat_at == clock.now and beat.started_at == clock.now - LEASE


def test_a_silent_worker_is_forgotten_and_its_job_retried_with_a_reason(
    store: SqlStore, clock: ManualClock
) -> None:
    (job,) = _enqueue(store, max_attempts=3)
    with store.transaction() as tx:
        tx.workers.beat("w1", "host-a", 11, LEASE)
    first = _claim(store, "w1")
    assert first is not None and first.started_at == clock.now
    with store.transaction() as tx:
        tx.jobs.set_stage(job.id, "w1", "preprocess")
    clock.advance(LEASE + timedelta(seconds=2))
    with store.transaction() as tx:
        tx.workers.beat("w2", "host-b", 12, LEASE)
        (requeued,) = tx.jobs.reap_expired()
        assert tx.workers.forget_silent(LEASE) == ["w1"]
        assert [w.id for w in tx.workers.list()] == ["w2"]
    assert requeued.status is JobStatus.QUEUED and requeued.started_at is None
    reason = requeued.retry_reason or ""
    assert "attempt 1 of 3" in reason and "worker w1" in reason and "32.0s ago" in reason
    clock.advance(timedelta(seconds=1))
    second = _claim(store, "w2")
    assert second is not None and second.attempts == 2 and second.started_at == clock.now
    with store.transaction() as tx:
        tx.jobs.succeed(job.id, "w2", None)
        events = tx.jobs.events(job.project_id, job.id)
    # Each event shows the attempt it belongs to, with that attempt's start.
    assert [(e.status.value, e.attempt) for e in events] == [
        ("queued", 0), ("running", 1), ("running", 1), ("queued", 1), ("running", 2),
        ("succeeded", 2),
    ]  # fmt: skip
    assert {e.started_at for e in events[1:3]} == {first.started_at}
    assert events[3].started_at is None  # back in the queue: no attempt running
    assert {e.started_at for e in events[4:]} == {second.started_at}
    assert [e.retry_reason for e in events[:3]] == [None] * 3
    assert {e.retry_reason for e in events[3:]} == {reason}


def test_a_stopping_worker_hands_its_job_back_without_using_an_attempt(store: SqlStore) -> None:
    (job,) = _enqueue(store)
    _claim(store, "w1")
    with store.transaction() as tx:
        tx.jobs.set_stage(job.id, "w1", "to_edge")
        assert tx.jobs.release(job.id, "w2", "not its job") is None
        released = tx.jobs.release(job.id, "w1", "worker w1 was stopped")
        tx.workers.remove("w1")
        assert tx.jobs.release(job.id, "w1", "again") is None  # no longer held
    assert released is not None and released.status is JobStatus.QUEUED
    assert (released.attempts, released.stage, released.worker_id) == (0, None, None)
    assert released.retry_reason == (
        "attempt 1 of 3 handed back (not counted): worker w1 was stopped"
    )
    again = _claim(store, "w2")
    assert again is not None and again.attempts == 1
    with store.transaction() as tx:
        events = tx.jobs.events(job.project_id, job.id)
    assert [(e.status.value, e.attempt) for e in events] == [
        ("queued", 0), ("running", 1), ("running", 1), ("queued", 0), ("running", 1),
    ]  # fmt: skip


def test_releasing_a_job_whose_cancel_was_requested_cancels_it(store: SqlStore) -> None:
    (job,) = _enqueue(store)
    _claim(store, "w1")
    with store.transaction() as tx:
        tx.jobs.cancel(job.project_id, job.id)
        released = tx.jobs.release(job.id, "w1", "worker w1 was stopped")
    assert released is not None and released.status is JobStatus.CANCELED


def test_a_crashed_attempt_is_retried_at_once_then_fails_with_its_code(store: SqlStore) -> None:
    (job,) = _enqueue(store, max_attempts=2)
    died = "the lowering process died with SIGKILL (likely out of memory)"
    _claim(store, "w1")
    with store.transaction() as tx:
        with pytest.raises(LeaseLostError):
            tx.jobs.retry(job.id, "w2", "compile_crashed", died)  # not its job
        retried = tx.jobs.retry(job.id, "w1", "compile_crashed", died)
    assert retried.status is JobStatus.QUEUED and retried.attempts == 1
    assert (retried.worker_id, retried.lease_expires_at, retried.error_code) == (None, None, None)
    assert retried.retry_reason == f"attempt 1 of 2 abandoned: {died}"
    again = _claim(store, "w1")
    assert again is not None and again.attempts == 2
    with store.transaction() as tx:
        failed = tx.jobs.retry(job.id, "w1", "compile_crashed", died)
    assert failed.status is JobStatus.FAILED and failed.error_code == "compile_crashed"
    assert failed.error_message == f"{died}; the job used all 2 attempts"
    assert _claim(store, "w1") is None


def _listen(url: str, *channels: str) -> psycopg.Connection[tuple[object, ...]]:
    conn = psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(False))
    conn.autocommit = True
    for channel in channels:
        conn.execute(f"LISTEN {channel}")
    return conn


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_postgres_notifies_queued_and_canceled_jobs_on_commit(
    store: SqlStore, database_url: str, clock: ManualClock
) -> None:
    with _listen(database_url, JOB_QUEUED_CHANNEL, JOB_CANCEL_CHANNEL) as conn:
        with store.transaction() as tx:
            project = tx.projects.get_or_create("p")
            job = tx.jobs.enqueue(project.id, "compile", {})
            assert list(conn.notifies(timeout=0.2)) == []  # nothing before the commit
        _claim(store, "w1")
        with store.transaction() as tx:
            tx.jobs.cancel(project.id, job.id)
        heard = [(n.channel, n.payload) for n in conn.notifies(timeout=5, stop_after=2)]
    assert heard == [(JOB_QUEUED_CHANNEL, "compile"), (JOB_CANCEL_CHANNEL, job.id)]


def test_events_from_before_0004_get_their_jobs_attempt(database_url: str) -> None:
    now = datetime.now(UTC)
    with schema_at(database_url, "0003") as conn:
        insert_old_job(
            conn, now, status="running", stage="emit", attempts=2, started_at=now, version=4
        )
        conn.execute(
            text("INSERT INTO job_events VALUES ('job_old', 4, 'running', 'emit', :now)"),
            {"now": now},
        )
    with current_store(database_url) as store, store.transaction() as tx:
        (event,) = tx.jobs.events("prj_old", "job_old")
        assert tx.workers.list() == []
    assert (event.attempt, event.started_at, event.retry_reason) == (2, now, None)
