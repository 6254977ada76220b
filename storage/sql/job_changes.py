"""How a job row changes: its status moves only as the state machine of
:mod:`pteforge.storage.jobstate` allows, every status or stage change is logged as a
:class:`JobEventRow`, and an attempt that ended without a verdict is retried or failed."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pteforge.storage.domain import JobStatus
from pteforge.storage.jobstate import check_transition
from pteforge.storage.models import JobEventRow, JobRow
from pteforge.storage.notifications import JOB_QUEUED_CHANNEL

LEASE_EXPIRED = "lease_expired"


class JobChanges:
    """The changes made to job rows in one session (nothing flushed here)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def move(self, row: JobRow, target: JobStatus, now: datetime) -> None:
        """The one place a job's status changes: rejects moves the state machine forbids
        and logs the others."""
        check_transition(row.id, JobStatus(row.status), target)
        row.status = target.value
        if target.terminal:
            row.finished_at = now
            row.lease_expires_at = None
        touch(row, now)
        self.log(row)

    def expire(self, row: JobRow, now: datetime, why: str, code: str = LEASE_EXPIRED) -> None:
        """What happens to a running job whose attempt ended without a verdict (its holder
        stopped, or its attempt crashed): retried while attempts remain, else failed."""
        if row.cancel_requested:
            self.move(row, JobStatus.CANCELED, now)
        elif row.attempts < row.max_attempts:
            reason = f"attempt {row.attempts} of {row.max_attempts} abandoned: {why}"
            self.requeue(row, now, reason)
        else:
            self.move(row, JobStatus.FAILED, now)
            row.error_code = code
            row.error_message = f"{why}; the job used all {row.max_attempts} attempts"
        row.worker_id = None
        row.lease_expires_at = None

    def requeue(self, row: JobRow, now: datetime, reason: str) -> None:
        """Running -> queued, the next attempt starting from the beginning."""
        row.stage, row.started_at = None, None
        row.worker_id, row.lease_expires_at = None, None
        row.retry_reason = reason
        self.move(row, JobStatus.QUEUED, now)
        self.notify(JOB_QUEUED_CHANNEL, row.kind)

    def log(self, row: JobRow) -> None:
        """Add the job's change log entry for the change just made (status or stage)."""
        event = JobEventRow(
            job_id=row.id, version=row.version, status=row.status, stage=row.stage,
            at=row.updated_at, attempt=row.attempts, started_at=row.started_at,
            retry_reason=row.retry_reason,
        )  # fmt: skip
        self._session.add(event)

    def notify(self, channel: str, payload: str) -> None:
        """Publish on a PostgreSQL channel; delivered when this transaction commits."""
        if self._session.get_bind().dialect.name == "postgresql":
            self._session.execute(select(func.pg_notify(channel, payload)))


def touch(row: JobRow, now: datetime) -> None:
    """Record a change to the row: ``updated_at`` and a new ``version``."""
    row.updated_at = now
    row.version += 1
