"""ORM rows to domain objects."""

from __future__ import annotations

from pteforge.storage.domain import (
    ApiToken,
    Artifact,
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


def project(row: ProjectRow) -> Project:
    return Project(id=row.id, name=row.name, created_at=row.created_at)


def token(row: TokenRow) -> ApiToken:
    return ApiToken(
        id=row.id,
        project_id=row.project_id,
        name=row.name,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


def program(row: ProgramRow) -> Program:
    return Program(
        id=row.id,
        project_id=row.project_id,
        name=row.name,
        sha256=row.blob_sha256,
        size_bytes=row.size_bytes,
        methods=methods_from_json(row.methods),
        created_at=row.created_at,
    )


def artifact(row: ArtifactRow) -> Artifact:
    return Artifact(
        id=row.id,
        project_id=row.project_id,
        program_id=row.program_id,
        sha256=row.blob_sha256,
        size_bytes=row.size_bytes,
        plan=dict(row.plan),
        plan_hash=row.plan_hash,
        report=dict(row.report),
        methods=methods_from_json(row.methods),
        created_at=row.created_at,
    )


def job(row: JobRow) -> Job:
    return Job(
        id=row.id,
        project_id=row.project_id,
        kind=row.kind,
        status=JobStatus(row.status),
        stage=row.stage,
        payload=dict(row.payload),
        error_code=row.error_code,
        error_message=row.error_message,
        artifact_id=row.artifact_id,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        worker_id=row.worker_id,
        lease_expires_at=row.lease_expires_at,
        cancel_requested=row.cancel_requested,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        updated_at=row.updated_at,
        version=row.version,
        retry_reason=row.retry_reason,
    )


def job_event(row: JobEventRow) -> JobEvent:
    return JobEvent(
        version=row.version,
        status=JobStatus(row.status),
        stage=row.stage,
        at=row.at,
        attempt=row.attempt,
        started_at=row.started_at,
        retry_reason=row.retry_reason,
    )


def worker_beat(row: WorkerRow) -> WorkerBeat:
    return WorkerBeat(
        id=row.id,
        host=row.host,
        pid=row.pid,
        started_at=row.started_at,
        heartbeat_at=row.heartbeat_at,
        job_id=row.job_id,
    )
