"""The job state machine, leases, heartbeats, cancellation and the reaper."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from pteforge.storage import (
    IllegalTransitionError,
    Job,
    JobStatus,
    LeaseLostError,
    SqlStore,
)
from pteforge.storage.errors import QueueFullError
from pteforge.storage.jobstate import ALLOWED_TRANSITIONS, check_transition
from tests.storage.conftest import ManualClock

LEASE = timedelta(seconds=30)


def _enqueue(store: SqlStore, n: int = 1, max_attempts: int = 3) -> list[Job]:
    with store.transaction() as tx:
        project = tx.projects.get_or_create("p")
        return [tx.jobs.enqueue(project.id, "compile", {"i": i}, max_attempts) for i in range(n)]


def _claim(store: SqlStore, worker: str = "w1") -> Job | None:
    with store.transaction() as tx:
        return tx.jobs.claim_next(worker, LEASE)


def test_claims_oldest_first_and_runs_to_success(store: SqlStore, clock: ManualClock) -> None:
    (first,) = _enqueue(store)
    clock.advance(timedelta(seconds=1))
    _enqueue(store)
    claimed = _claim(store)
    assert claimed is not None and claimed.id == first.id
    assert claimed.status is JobStatus.RUNNING and claimed.attempts == 1
    assert claimed.lease_expires_at == clock.now + LEASE
    with store.transaction() as tx:
        staged = tx.jobs.set_stage(first.id, "w1", "lowering")
        assert staged.version > claimed.version and staged.stage == "lowering"
        done = tx.jobs.succeed(first.id, "w1", None)
    assert done.status is JobStatus.SUCCEEDED and done.finished_at == clock.now
    assert done.created_at.tzinfo is not None


def test_projects_take_turns_however_long_a_backlog_is(store: SqlStore, clock: ManualClock) -> None:
    """The oldest queued job of the project served longest ago goes first: a project that
    queued three jobs before another queued one does not make it wait for all three."""
    backlog = []
    for i in range(3):  # a second apart: created_at orders them
        clock.advance(timedelta(seconds=1))
        with store.transaction() as tx:
            busy = tx.projects.get_or_create("busy")
            backlog.append(tx.jobs.enqueue(busy.id, "compile", {"i": i}, 3))
    clock.advance(timedelta(seconds=1))
    with store.transaction() as tx:
        late = tx.jobs.enqueue(tx.projects.get_or_create("other").id, "compile", {}, 3)
    order = []
    for _ in range(4):
        clock.advance(timedelta(seconds=1))
        claimed = _claim(store)
        assert claimed is not None
        order.append(claimed.id)
    assert order == [backlog[0].id, late.id, backlog[1].id, backlog[2].id]


def test_claim_respects_kinds(store: SqlStore) -> None:
    _enqueue(store)
    with store.transaction() as tx:
        assert tx.jobs.claim_next("w1", LEASE, kinds=["export"]) is None
        assert tx.jobs.claim_next("w1", LEASE, kinds=["compile"]) is not None
        assert tx.jobs.claim_next("w1", LEASE) is None


def test_every_transition_outside_the_table_is_illegal() -> None:
    for current in JobStatus:
        for target in JobStatus:
            if target in ALLOWED_TRANSITIONS[current]:
                check_transition("j", current, target)
            else:
                with pytest.raises(IllegalTransitionError):
                    check_transition("j", current, target)


def test_illegal_moves_through_the_store_are_rejected(store: SqlStore) -> None:
    (job,) = _enqueue(store)
    with store.transaction() as tx, pytest.raises(LeaseLostError):
        tx.jobs.succeed(job.id, "w1", None)  # queued: nobody holds it
    _claim(store)
    with store.transaction() as tx:
        with pytest.raises(LeaseLostError):
            tx.jobs.fail(job.id, "someone-else", "x", "y")
        with pytest.raises(IllegalTransitionError):
            tx.jobs.acknowledge_cancel(job.id, "w1")  # no cancel was requested
        tx.jobs.fail(job.id, "w1", "lowering_failed", "boom")
    with store.transaction() as tx:
        with pytest.raises(IllegalTransitionError):
            tx.jobs.cancel(job.project_id, job.id)
        with pytest.raises(LeaseLostError):
            tx.jobs.succeed(job.id, "w1", None)
        failed = tx.jobs.get(job.project_id, job.id)
    assert failed is not None and failed.status is JobStatus.FAILED
    assert (failed.error_code, failed.error_message) == ("lowering_failed", "boom")


def test_cancel_queued_at_once_and_running_through_the_worker(store: SqlStore) -> None:
    queued, running = _enqueue(store, 2)
    with store.transaction() as tx:
        canceled = tx.jobs.cancel(queued.project_id, queued.id)
        assert canceled is not None and canceled.status is JobStatus.CANCELED
        assert tx.jobs.cancel(queued.project_id, queued.id) == canceled  # idempotent
    assert _claim(store) is not None
    with store.transaction() as tx:
        requested = tx.jobs.cancel(running.project_id, running.id)
        assert requested is not None and requested.status is JobStatus.RUNNING
        assert requested.cancel_requested
        assert not tx.jobs.heartbeat(running.id, "w1", LEASE)  # tells the worker to stop
        assert tx.jobs.acknowledge_cancel(running.id, "w1").status is JobStatus.CANCELED


def test_expired_lease_is_requeued_then_failed(store: SqlStore, clock: ManualClock) -> None:
    (job,) = _enqueue(store, max_attempts=2)
    _claim(store, "w1")
    clock.advance(LEASE / 2)
    with store.transaction() as tx:
        assert tx.jobs.heartbeat(job.id, "w1", LEASE)
        clock.advance(LEASE / 2 + timedelta(seconds=1))
        assert tx.jobs.reap_expired() == []  # the heartbeat extended the lease
    clock.advance(LEASE)
    with store.transaction() as tx:
        (requeued,) = tx.jobs.reap_expired()
    assert requeued.status is JobStatus.QUEUED and requeued.worker_id is None
    with store.transaction() as tx:
        assert not tx.jobs.heartbeat(job.id, "w1", LEASE)  # the old holder lost it
    again = _claim(store, "w2")
    assert again is not None and again.attempts == 2
    clock.advance(LEASE * 2)
    with store.transaction() as tx:
        (failed,) = tx.jobs.reap_expired()
        with pytest.raises(LeaseLostError):
            tx.jobs.succeed(job.id, "w2", None)
    assert failed.status is JobStatus.FAILED and failed.error_code == "lease_expired"
    assert "2 attempts" in (failed.error_message or "")


def test_expired_lease_with_cancel_requested_is_canceled(
    store: SqlStore, clock: ManualClock
) -> None:
    (job,) = _enqueue(store)
    _claim(store)
    with store.transaction() as tx:
        tx.jobs.cancel(job.project_id, job.id)
    clock.advance(LEASE * 2)
    with store.transaction() as tx:
        (reaped,) = tx.jobs.reap_expired()
    assert reaped.status is JobStatus.CANCELED


def test_list_newest_first_and_by_status(store: SqlStore, clock: ManualClock) -> None:
    jobs = []
    for _ in range(3):
        jobs += _enqueue(store)
        clock.advance(timedelta(seconds=1))
    _claim(store)
    with store.transaction() as tx:
        listed = tx.jobs.list(jobs[0].project_id)
        queued = tx.jobs.list(jobs[0].project_id, status=JobStatus.QUEUED)
    assert [j.id for j in listed] == [j.id for j in reversed(jobs)]
    assert [j.id for j in queued] == [jobs[2].id, jobs[1].id]


def _changes(store: SqlStore, job: Job, after: int = 0) -> list[tuple[str, str | None]]:
    with store.transaction() as tx:
        return [(e.status.value, e.stage) for e in tx.jobs.events(job.project_id, job.id, after)]


def test_every_status_and_stage_change_is_logged(store: SqlStore, clock: ManualClock) -> None:
    (job,) = _enqueue(store)
    _claim(store)
    with store.transaction() as tx:
        tx.jobs.heartbeat(job.id, "w1", LEASE)  # not a change: not logged
        tx.jobs.set_stage(job.id, "w1", "to_edge")
        clock.advance(timedelta(seconds=2))
        tx.jobs.set_stage(job.id, "w1", "emit")
        done = tx.jobs.succeed(job.id, "w1", None)
        events = tx.jobs.events(job.project_id, job.id)
    assert [(e.status.value, e.stage) for e in events] == [
        ("queued", None),
        ("running", None),
        ("running", "to_edge"),
        ("running", "emit"),
        ("succeeded", "emit"),
    ]
    assert events[-1].version == done.version
    assert events[2].at + timedelta(seconds=2) == events[3].at
    assert _changes(store, job, after=events[2].version) == [
        ("running", "emit"),
        ("succeeded", "emit"),
    ]


def test_a_retry_starts_its_stages_afresh(store: SqlStore, clock: ManualClock) -> None:
    (job,) = _enqueue(store, max_attempts=2)
    _claim(store)
    with store.transaction() as tx:
        tx.jobs.set_stage(job.id, "w1", "partition")
    clock.advance(LEASE * 2)
    with store.transaction() as tx:
        tx.jobs.reap_expired()
    _claim(store, "w2")
    with store.transaction() as tx:
        tx.jobs.cancel(job.project_id, job.id)  # only requested: not a change yet
        tx.jobs.acknowledge_cancel(job.id, "w2")
    assert _changes(store, job)[2:] == [
        ("running", "partition"),
        ("queued", None),
        ("running", None),
        ("canceled", None),
    ]


def test_events_are_scoped_to_the_project(store: SqlStore) -> None:
    (job,) = _enqueue(store)
    with store.transaction() as tx:
        other = tx.projects.get_or_create("other")
        assert tx.jobs.events(other.id, job.id) == []
        assert tx.jobs.events(job.project_id, "job_missing") == []


def test_finished_jobs_past_retention_are_deleted(store: SqlStore, clock: ManualClock) -> None:
    jobs = _enqueue(store, 3)
    old_done, old_running = _claim(store, "w1"), _claim(store, "w2")
    assert old_done is not None and old_running is not None
    (recent,) = [j for j in jobs if j.id not in {old_done.id, old_running.id}]
    with store.transaction() as tx:
        tx.jobs.succeed(old_done.id, "w1", None)
    clock.advance(timedelta(days=2))
    with store.transaction() as tx:
        tx.jobs.cancel(recent.project_id, recent.id)  # queued: canceled now
        assert tx.jobs.delete_finished(timedelta(days=1)) == 1
    with store.transaction() as tx:
        assert tx.jobs.get(old_done.project_id, old_done.id) is None
        assert tx.jobs.events(old_done.project_id, old_done.id) == []
        assert tx.jobs.get(old_running.project_id, old_running.id) is not None  # not ended
        assert tx.jobs.get(recent.project_id, recent.id) is not None  # ended a moment ago
        assert tx.jobs.delete_finished(timedelta(days=1)) == 0


def test_deleting_finished_jobs_goes_in_batches(store: SqlStore, clock: ManualClock) -> None:
    jobs = _enqueue(store, 3)
    with store.transaction() as tx:
        for job in jobs:
            tx.jobs.cancel(job.project_id, job.id)
    clock.advance(timedelta(hours=1))
    with store.transaction() as tx:
        assert tx.jobs.delete_finished(timedelta(minutes=1), limit=2) == 2
        assert tx.jobs.delete_finished(timedelta(minutes=1), limit=2) == 1
        assert tx.jobs.list(jobs[0].project_id) == []


def _enqueue_within(store: SqlStore, limit: int) -> bool:
    """True if a job was queued in project "p" under ``limit``, False if it was refused."""
    with store.transaction() as tx:
        project = tx.projects.get_or_create("p")
    try:
        with store.transaction() as tx:
            tx.jobs.enqueue(project.id, "compile", {}, unfinished_limit=limit)
    except QueueFullError as exc:
        assert "3 unfinished jobs" in str(exc)
        return False
    return True


def test_unfinished_jobs_per_project_are_bounded(store: SqlStore) -> None:
    """A project's queued and running jobs are bounded (rows every worker's claim passes
    over); concurrent enqueues are counted under the project's lock, so none slips past
    the limit. A finished job frees its place; other projects are not counted."""
    with ThreadPoolExecutor(8) as pool:
        queued = list(pool.map(lambda _: _enqueue_within(store, 3), range(8)))
    assert sorted(queued) == [False] * 5 + [True] * 3
    running = _claim(store)
    assert running is not None and not _enqueue_within(store, 3)  # running still counts
    with store.transaction() as tx:
        tx.jobs.succeed(running.id, "w1", None)
        other = tx.projects.get_or_create("other")
        tx.jobs.enqueue(other.id, "compile", {}, unfinished_limit=1)
    assert _enqueue_within(store, 3)
