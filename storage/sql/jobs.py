"""Jobs as rows: enqueue, atomic claim, leases and heartbeats, and the state machine."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.orm import Session

from pteforge.storage import domain
from pteforge.storage.domain import JobStatus
from pteforge.storage.errors import (
    IllegalTransitionError,
    LeaseLostError,
    NotFoundError,
    QueueFullError,
)
from pteforge.storage.ids import new_id
from pteforge.storage.jobs import DEFAULT_MAX_ATTEMPTS, JobRepository
from pteforge.storage.jobstate import check_transition
from pteforge.storage.models import ArtifactRow, JobEventRow, JobRow, ProjectRow, WorkerRow
from pteforge.storage.notifications import JOB_CANCEL_CHANNEL, JOB_QUEUED_CHANNEL
from pteforge.storage.sql import convert
from pteforge.storage.sql.job_changes import JobChanges, touch

# The API's job reads, built once as Core statements over the table's columns: they skip the
# ORM's statement compilation and entity bookkeeping, most of a /v1 job read's CPU.
_jobs = JobRow.__table__
_PROJECT_JOB = select(_jobs).where(
    _jobs.c.id == bindparam("id"), _jobs.c.project_id == bindparam("project")
)
_NEWEST_FIRST = (_jobs.c.created_at.desc(), _jobs.c.id)
_PROJECT_JOBS = (
    select(_jobs)
    .where(_jobs.c.project_id == bindparam("project"))
    .order_by(*_NEWEST_FIRST)
    .limit(bindparam("limit"))
)
_UNFINISHED = tuple(status.value for status in JobStatus if not status.terminal)
_PROJECT_JOBS_IN_STATUS = _PROJECT_JOBS.where(_jobs.c.status == bindparam("status"))
_served = _jobs.alias("served")
_LAST_SERVED = (
    select(func.max(_served.c.started_at))
    .where(_served.c.project_id == JobRow.project_id)
    .scalar_subquery()
)
"""When a worker last started a job of the queued job's project (NULL: never): workers take
the oldest queued job of the project served longest ago, so one project's backlog of jobs
takes turns with every other project's instead of going first (ix_jobs_project_id_started_at
reads it without the project's history)."""


class SqlJobs(JobRepository):
    def __init__(self, session: Session, clock: Callable[[], datetime]) -> None:
        self._session = session
        self._clock = clock
        self._changes = JobChanges(session)

    def enqueue(
        self,
        project_id: str,
        kind: str,
        payload: Mapping[str, Any],
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        artifact_id: str | None = None,
        unfinished_limit: int | None = None,
    ) -> domain.Job:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        locked = unfinished_limit is not None  # serialises this project's enqueues
        if self._session.get(ProjectRow, project_id, with_for_update=locked) is None:
            raise NotFoundError(f"project {project_id} not found")
        if unfinished_limit is not None:
            self._check_room(project_id, unfinished_limit)
        if artifact_id is not None:
            self._keep_artifact(artifact_id)
        now = self._clock()
        row = JobRow(
            id=new_id("job"), project_id=project_id, kind=kind,
            status=JobStatus.QUEUED.value, stage=None, payload=dict(payload),
            error_code=None, error_message=None, artifact_id=artifact_id, attempts=0,
            max_attempts=max_attempts, worker_id=None, lease_expires_at=None,
            cancel_requested=False, created_at=now, started_at=None, finished_at=None,
            updated_at=now, version=1,
        )  # fmt: skip
        self._session.add(row)
        self._session.flush()  # the event's foreign key needs the job row first
        self._changes.log(row)
        self._session.flush()
        self._changes.notify(JOB_QUEUED_CHANNEL, kind)
        return convert.job(row)

    def _keep_artifact(self, artifact_id: str) -> None:
        """A shared lock on the artifact a job names: one deleted meanwhile is NotFoundError
        (on PostgreSQL the job's row failed its foreign key: a 409 or a failed job quoting
        the constraint) and its deletion waits for this transaction."""
        if self._session.get(ArtifactRow, artifact_id, with_for_update={"read": True}) is None:
            raise NotFoundError(f"artifact {artifact_id!r} no longer exists")

    def _check_room(self, project_id: str, limit: int) -> None:
        unfinished = self._session.scalar(
            select(func.count())
            .select_from(_jobs)
            .where(_jobs.c.project_id == project_id, _jobs.c.status.in_(_UNFINISHED))
        )
        if (unfinished or 0) >= limit:
            raise QueueFullError(
                f"this project has {unfinished} unfinished jobs (queued or running), as many "
                "as it may have: wait for one to finish, or cancel one"
            )

    def get(self, project_id: str, job_id: str) -> domain.Job | None:
        self._session.flush()  # Core statements see the session's changes only once flushed
        row = self._session.execute(_PROJECT_JOB, {"id": job_id, "project": project_id}).first()
        return None if row is None else convert.job(row)

    def get_any(self, job_id: str) -> domain.Job | None:
        row = self._session.get(JobRow, job_id, populate_existing=True)
        return None if row is None else convert.job(row)

    def events(
        self, project_id: str, job_id: str, after_version: int = 0
    ) -> builtins.list[domain.JobEvent]:
        query = (
            select(JobEventRow)
            .join(JobRow, JobRow.id == JobEventRow.job_id)
            .where(JobRow.id == job_id, JobRow.project_id == project_id)
            .where(JobEventRow.version > after_version)
            .order_by(JobEventRow.version)
        )
        return [convert.job_event(r) for r in self._session.scalars(query)]

    def list(
        self, project_id: str, status: JobStatus | None = None, limit: int = 100
    ) -> list[domain.Job]:
        self._session.flush()
        query, params = _PROJECT_JOBS, {"project": project_id, "limit": limit}
        if status is not None:
            query, params = _PROJECT_JOBS_IN_STATUS, {**params, "status": status.value}
        return [convert.job(r) for r in self._session.execute(query, params)]

    def claim_next(
        self, worker_id: str, lease: timedelta, kinds: Sequence[str] | None = None
    ) -> domain.Job | None:
        # SKIP LOCKED lets PostgreSQL workers pass over rows another worker is claiming;
        # SQLite ignores it and serialises claims with BEGIN IMMEDIATE instead.
        query = select(JobRow).where(JobRow.status == JobStatus.QUEUED.value)
        if kinds is not None:
            query = query.where(JobRow.kind.in_(list(kinds)))
        query = query.order_by(_LAST_SERVED.asc().nulls_first(), JobRow.created_at, JobRow.id)
        query = query.limit(1)
        row = self._session.scalars(
            query.with_for_update(skip_locked=True).execution_options(populate_existing=True)
        ).first()
        if row is None:
            return None
        now = self._clock()
        row.worker_id = worker_id
        row.lease_expires_at = now + lease
        row.attempts += 1
        row.started_at = now
        self._changes.move(row, JobStatus.RUNNING, now)  # logs the change with the new attempt
        self._session.flush()
        return convert.job(row)

    def _held(self, job_id: str, worker_id: str) -> JobRow:
        row = self._session.get(JobRow, job_id, with_for_update=True, populate_existing=True)
        if row is None:
            raise NotFoundError(f"job {job_id} not found")
        if row.status != JobStatus.RUNNING.value or row.worker_id != worker_id:
            raise LeaseLostError(
                f"job {job_id} is not held by worker {worker_id} (status {row.status})"
            )
        return row

    def heartbeat(self, job_id: str, worker_id: str, lease: timedelta) -> bool:
        try:
            row = self._held(job_id, worker_id)
        except (LeaseLostError, NotFoundError):
            return False
        now = self._clock()
        row.lease_expires_at = now + lease
        row.updated_at = now
        self._session.flush()
        return not row.cancel_requested

    def set_stage(self, job_id: str, worker_id: str, stage: str) -> domain.Job:
        row = self._held(job_id, worker_id)
        row.stage = stage
        touch(row, self._clock())
        self._changes.log(row)
        self._session.flush()
        return convert.job(row)

    def succeed(
        self,
        job_id: str,
        worker_id: str,
        artifact_id: str | None,
        result: Mapping[str, Any] | None = None,
    ) -> domain.Job:
        row = self._held(job_id, worker_id)
        if artifact_id is not None:
            self._keep_artifact(artifact_id)
        self._changes.move(row, JobStatus.SUCCEEDED, self._clock())
        row.artifact_id = artifact_id
        row.result = None if result is None else dict(result)
        self._session.flush()
        return convert.job(row)

    def fail(self, job_id: str, worker_id: str, code: str, message: str) -> domain.Job:
        row = self._held(job_id, worker_id)
        self._changes.move(row, JobStatus.FAILED, self._clock())
        row.error_code, row.error_message = code, message
        self._session.flush()
        return convert.job(row)

    def acknowledge_cancel(self, job_id: str, worker_id: str) -> domain.Job:
        row = self._held(job_id, worker_id)
        if not row.cancel_requested:
            raise IllegalTransitionError(f"job {job_id} has no cancel request to acknowledge")
        self._changes.move(row, JobStatus.CANCELED, self._clock())
        self._session.flush()
        return convert.job(row)

    def cancel(self, project_id: str, job_id: str) -> domain.Job | None:
        row = self._session.get(JobRow, job_id, with_for_update=True, populate_existing=True)
        if row is None or row.project_id != project_id:
            return None
        status = JobStatus(row.status)
        if status is JobStatus.QUEUED:
            self._changes.move(row, JobStatus.CANCELED, self._clock())
        elif status is JobStatus.RUNNING and not row.cancel_requested:
            row.cancel_requested = True
            touch(row, self._clock())
            self._changes.notify(JOB_CANCEL_CHANNEL, row.id)
        elif status.terminal and status is not JobStatus.CANCELED:
            check_transition(job_id, status, JobStatus.CANCELED)
        self._session.flush()
        return convert.job(row)

    def delete_finished(self, older_than: timedelta, limit: int = 1000) -> int:
        ended = select(JobRow.id).where(
            JobRow.status.in_([s.value for s in JobStatus if s.terminal]),
            JobRow.finished_at < self._clock() - older_than,
        )
        ids = list(self._session.scalars(ended.order_by(JobRow.finished_at).limit(limit)))
        # The log is deleted explicitly rather than through the foreign key's cascade, which
        # SQLite honours only on connections that turned foreign keys on.
        self._session.execute(delete(JobEventRow).where(JobEventRow.job_id.in_(ids)))
        self._session.execute(delete(JobRow).where(JobRow.id.in_(ids)))
        self._session.flush()
        return len(ids)

    def reap_expired(self) -> builtins.list[domain.Job]:
        now = self._clock()
        rows = self._session.scalars(
            select(JobRow)
            .where(JobRow.status == JobStatus.RUNNING.value, JobRow.lease_expires_at < now)
            .with_for_update(skip_locked=True)
            .execution_options(populate_existing=True)
        ).all()
        for row in rows:
            self._changes.expire(row, now, self._silence(row, now))
        self._session.flush()
        return [convert.job(r) for r in rows]

    def retry(self, job_id: str, worker_id: str, code: str, reason: str) -> domain.Job:
        row = self._held(job_id, worker_id)
        self._changes.expire(row, self._clock(), reason, code)
        self._session.flush()
        return convert.job(row)

    def release(self, job_id: str, worker_id: str, reason: str) -> domain.Job | None:
        try:
            row = self._held(job_id, worker_id)
        except (LeaseLostError, NotFoundError):
            return None
        now = self._clock()
        if row.cancel_requested:
            self._changes.expire(row, now, reason)  # canceled: nothing to hand back
        else:
            attempt = f"attempt {row.attempts} of {row.max_attempts}"
            row.attempts -= 1  # not counted: the job gets this attempt again
            self._changes.requeue(row, now, f"{attempt} handed back (not counted): {reason}")
        self._session.flush()
        return convert.job(row)

    def _silence(self, row: JobRow, now: datetime) -> str:
        """Why a running job's lease expired, as its retry reason."""
        beat = self._session.scalar(
            select(WorkerRow.heartbeat_at).where(WorkerRow.id == row.worker_id)
        )
        last = f"{(now - beat).total_seconds():.1f}s ago" if beat is not None else "unknown"
        return f"worker {row.worker_id} stopped heartbeating (last heartbeat {last})"
