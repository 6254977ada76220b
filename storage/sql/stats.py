"""Aggregates of the SQL store for operations metrics."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from itertools import groupby, pairwise

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pteforge.storage.domain import JobStatus, StageTime, StoreSize
from pteforge.storage.models import ArtifactRow, BlobRow, JobEventRow, JobRow, ProgramRow
from pteforge.storage.store import StatsRepository

RETRIED = "retried"


class SqlStats(StatsRepository):
    def __init__(self, session: Session) -> None:
        self._session = session

    def job_counts(self) -> dict[tuple[JobStatus, str | None], int]:
        query = select(JobRow.status, JobRow.error_code, func.count()).group_by(
            JobRow.status, JobRow.error_code
        )
        return {(JobStatus(s), code): n for s, code, n in self._session.execute(query)}

    def oldest_queued_at(self) -> datetime | None:
        query = select(func.min(JobRow.created_at)).where(JobRow.status == JobStatus.QUEUED.value)
        return self._session.scalar(query)

    def stage_times(self, since: datetime, limit: int = 1000) -> builtins.list[StageTime]:
        recent = (
            select(JobRow.id)
            .where(JobRow.finished_at >= since)
            .order_by(JobRow.finished_at.desc())
            .limit(limit)
            .scalar_subquery()
        )
        rows = self._session.execute(
            select(JobEventRow.job_id, JobEventRow.status, JobEventRow.stage, JobEventRow.at)
            .where(JobEventRow.job_id.in_(recent))
            .order_by(JobEventRow.job_id, JobEventRow.version)
        )
        times: list[StageTime] = []
        for _, events in groupby(rows, key=lambda row: row[0]):
            times += _stage_times([(status, stage, at) for _, status, stage, at in events])
        return times

    def sizes(self) -> builtins.list[StoreSize]:
        sized = (
            ("content", BlobRow.size),
            ("programs", ProgramRow.size_bytes),
            ("artifacts", ArtifactRow.size_bytes),
        )
        found = []
        for kind, column in sized:
            count, total = self._session.execute(
                select(func.count(), func.coalesce(func.sum(column), 0))
            ).one()
            found.append(StoreSize(kind, int(count), int(total)))
        for kind, table in (("jobs", JobRow), ("job_events", JobEventRow)):
            rows = self._session.scalar(select(func.count()).select_from(table))
            found.append(StoreSize(kind, int(rows or 0), 0))
        return found


def _stage_times(events: Sequence[tuple[str, str | None, datetime]]) -> list[StageTime]:
    """Stage durations of one finished job from its log: each change ends the stage before
    it. ``queued`` is a wait for a worker, ``claimed`` the time from a claim to the first
    stage; the stages of an attempt that went back to the queue count as ``retried``."""
    outcome = events[-1][0]
    times, attempt = [], []
    for (status, stage, at), (next_status, _, next_at) in pairwise(events):
        seconds = (next_at - at).total_seconds()
        if status == JobStatus.QUEUED.value:
            times.append(StageTime("queued", outcome, seconds))
            continue
        attempt.append(StageTime(stage or "claimed", outcome, seconds))
        if next_status == JobStatus.QUEUED.value:  # this attempt was abandoned
            times += [StageTime(t.stage, RETRIED, t.seconds) for t in attempt]
            attempt = []
    return times + attempt
