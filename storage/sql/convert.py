"""ORM rows to domain objects."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from sqlalchemy import Row

from pteforge.storage.domain import (
    ApiToken,
    Artifact,
    BlobRef,
    Job,
    JobEvent,
    JobStatus,
    Program,
    Project,
    WorkerBeat,
    methods_from_json,
)
from pteforge.storage.models import (
    ArtifactRow,
    JobEventRow,
    JobRow,
    ProgramRow,
    ProjectRow,
    TokenRow,
    WorkerRow,
)

_T = TypeVar("_T")


def _domain(cls: type[_T], row: object, **converted: Any) -> _T:
    """A ``cls`` whose fields are the row's columns of the same names, except ``converted``."""
    names = (f.name for f in fields(cls))  # type: ignore[arg-type]
    values = {name: getattr(row, name) for name in names if name not in converted}
    return cls(**values, **converted)


def project(row: ProjectRow) -> Project:
    return _domain(Project, row)


def token(row: TokenRow) -> ApiToken:
    return _domain(ApiToken, row)


def program(row: ProgramRow) -> Program:
    return _domain(Program, row, sha256=row.blob_sha256, methods=methods_from_json(row.methods))


def artifact(row: ArtifactRow) -> Artifact:
    return _domain(
        Artifact,
        row,
        sha256=row.blob_sha256,
        plan=dict(row.plan),
        report=dict(row.report),
        methods=methods_from_json(row.methods),
        data=None
        if row.data_sha256 is None or row.data_size is None
        else BlobRef(row.data_sha256, row.data_size),
    )


def job(row: JobRow | Row[Any]) -> Job:
    """From an ORM row, or a Core row of the jobs table's columns (the API's reads)."""
    return _domain(Job, row, status=JobStatus(row.status), payload=dict(row.payload))


def job_event(row: JobEventRow) -> JobEvent:
    return _domain(JobEvent, row, status=JobStatus(row.status))


def worker_beat(row: WorkerRow) -> WorkerBeat:
    return _domain(WorkerBeat, row)
