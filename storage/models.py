"""SQLAlchemy 2.0 typed ORM models. Internal to the storage layer: callers get domain objects.

The schema itself comes only from the Alembic migrations in ``migrations/``; a test checks that
these models and the migrations agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use timezone-aware UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class _ProjectOwned:
    """The columns of every row a project owns: its id, the project (a row goes with it) and
    when it was created."""

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class _StoredContent(_ProjectOwned):
    """A project's row that references stored content (programs, artifacts) and the methods
    of that content."""

    blob_sha256: Mapped[str] = mapped_column(ForeignKey("blobs.sha256"), index=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    methods: Mapped[list[Any]] = mapped_column(JSON)


class ProjectRow(Base):
    __tablename__ = "projects"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class TokenRow(_ProjectOwned, Base):
    __tablename__ = "api_tokens"

    name: Mapped[str] = mapped_column(String(200))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class BlobUploadRow(Base):
    """One attempt to write content; its chunks are invisible until a blob row points at it."""

    __tablename__ = "blob_uploads"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)


class BlobChunkRow(Base):
    __tablename__ = "blob_chunks"

    upload_id: Mapped[str] = mapped_column(
        ForeignKey("blob_uploads.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The digest of ``data`` recorded by the writer: BLAKE3 since migration 0002, SHA-256 before.
    blake3: Mapped[str | None] = mapped_column(String(64))
    sha256: Mapped[str | None] = mapped_column(String(64))
    data: Mapped[bytes] = mapped_column(LargeBinary)


class BlobRow(Base):
    """Published, verified content addressed by its sha256."""

    __tablename__ = "blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    chunk_size: Mapped[int] = mapped_column(Integer)
    upload_id: Mapped[str] = mapped_column(ForeignKey("blob_uploads.id"), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class ProgramRow(_StoredContent, Base):
    __tablename__ = "programs"

    name: Mapped[str] = mapped_column(String(200))


class ArtifactRow(_StoredContent, Base):
    __tablename__ = "artifacts"
    __table_args__ = (UniqueConstraint("program_id", "plan_hash"),)

    program_id: Mapped[str | None] = mapped_column(ForeignKey("programs.id", ondelete="SET NULL"))
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    plan_hash: Mapped[str] = mapped_column(String(64))
    report: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The artifact as an ExecuTorch BundledProgram (.bpte: its numerics check's inputs and
    # expected outputs), where its compile stored one.
    bundle_sha256: Mapped[str | None] = mapped_column(ForeignKey("blobs.sha256"), index=True)
    # The .ptd holding the constants the .pte keeps outside (program-data separation), if any.
    data_sha256: Mapped[str | None] = mapped_column(ForeignKey("blobs.sha256"), index=True)
    data_size: Mapped[int | None] = mapped_column(BigInteger)


class ModelRow(_ProjectOwned, Base):
    """A model name in a project; ``next_version`` counts on past deleted versions."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("project_id", "name"),)

    name: Mapped[str] = mapped_column(String(64))
    next_version: Mapped[int] = mapped_column(Integer)


class ModelVersionRow(Base):
    """One version of a model: (model, version) is unique, and a model is one (project, name),
    so no two versions of a project's model share a number. An artifact a version points at
    cannot be deleted (no ``ondelete``)."""

    __tablename__ = "model_versions"

    model_id: Mapped[str] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    artifact_id: Mapped[str] = mapped_column(ForeignKey("artifacts.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class ModelTokenizerRow(Base):
    """The tokenizer attached to one model version (a ``tokenizer.json`` and optionally its
    ``tokenizer_config.json``), stored as content; it goes with its version."""

    __tablename__ = "model_tokenizers"
    __table_args__ = (
        ForeignKeyConstraint(
            ["model_id", "version"],
            ["model_versions.model_id", "model_versions.version"],
            ondelete="CASCADE",
        ),
    )

    model_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    tokenizer_sha256: Mapped[str] = mapped_column(ForeignKey("blobs.sha256"), index=True)
    tokenizer_size: Mapped[int] = mapped_column(BigInteger)
    config_sha256: Mapped[str | None] = mapped_column(ForeignKey("blobs.sha256"), index=True)
    config_size: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class JobRow(_ProjectOwned, Base):
    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_status_created_at", "status", "created_at"),
        Index("ix_jobs_status_lease_expires_at", "status", "lease_expires_at"),
        Index("ix_jobs_project_id_started_at", "project_id", "started_at"),
    )

    kind: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    stage: Mapped[str | None] = mapped_column(String(200))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    artifact_id: Mapped[str | None] = mapped_column(ForeignKey("artifacts.id", ondelete="SET NULL"))
    attempts: Mapped[int] = mapped_column(Integer)
    max_attempts: Mapped[int] = mapped_column(Integer)
    worker_id: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    cancel_requested: Mapped[bool] = mapped_column(Boolean)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    version: Mapped[int] = mapped_column(Integer)
    # Why the job went back to the queue last (a stopped worker), None if it never did.
    retry_reason: Mapped[str | None] = mapped_column(Text)
    # What a succeeded job produced besides an artifact (a profile job's profile), if any.
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class JobEventRow(Base):
    """One status or stage change of a job, keyed by the job's ``version`` after it."""

    __tablename__ = "job_events"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    stage: Mapped[str | None] = mapped_column(String(200))
    at: Mapped[datetime] = mapped_column(UtcDateTime())
    # The job's attempt, its start and retry reason as they were at this change.
    attempt: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    retry_reason: Mapped[str | None] = mapped_column(Text)


class WorkerRow(Base):
    """A live compile worker process; it renews ``heartbeat_at`` every few seconds."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime())
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime())
    job_id: Mapped[str | None] = mapped_column(String(64))
