"""Compile workers as rows: heartbeats that keep the leases of the jobs a worker holds."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from pteforge.storage import domain
from pteforge.storage.domain import JobStatus
from pteforge.storage.models import JobRow, WorkerRow
from pteforge.storage.sql import convert
from pteforge.storage.store import WorkerRepository


class SqlWorkers(WorkerRepository):
    def __init__(self, session: Session, clock: Callable[[], datetime]) -> None:
        self._session = session
        self._clock = clock

    def beat(self, worker_id: str, host: str, pid: int, lease: timedelta) -> None:
        now = self._clock()
        held = self._session.execute(
            update(JobRow)
            .where(JobRow.worker_id == worker_id, JobRow.status == JobStatus.RUNNING.value)
            .values(lease_expires_at=now + lease)
            .returning(JobRow.id)
        ).scalars()
        job_id = next(iter(held), None)
        row = self._session.get(WorkerRow, worker_id, populate_existing=True)
        if row is None:
            row = WorkerRow(id=worker_id, host=host, pid=pid, started_at=now, heartbeat_at=now)
            self._session.add(row)
        row.heartbeat_at, row.job_id = now, job_id
        self._session.flush()

    def remove(self, worker_id: str) -> None:
        self._session.execute(delete(WorkerRow).where(WorkerRow.id == worker_id))
        self._session.flush()

    def forget_silent(self, older_than: timedelta) -> builtins.list[str]:
        cutoff = self._clock() - older_than
        silent = WorkerRow.heartbeat_at < cutoff
        ids = list(self._session.scalars(select(WorkerRow.id).where(silent)))
        self._session.execute(delete(WorkerRow).where(WorkerRow.id.in_(ids)))
        self._session.flush()
        return ids

    def list(self) -> builtins.list[domain.WorkerBeat]:
        rows = self._session.scalars(select(WorkerRow).order_by(WorkerRow.started_at))
        return [convert.worker_beat(r) for r in rows]
