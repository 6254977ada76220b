"""Domain objects handed out by the store: frozen dataclasses, never ORM rows."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# A stored method's specs are the shared contract types.
from pteforge.contracts.specs import MethodSignature as MethodSignature
from pteforge.contracts.specs import TensorSpec as TensorSpec
from pteforge.contracts.specs import methods_from_json as methods_from_json
from pteforge.contracts.specs import methods_to_json as methods_to_json

JsonObject = dict[str, Any]


class JobStatus(enum.StrEnum):
    """The states of a job; see :mod:`pteforge.storage.jobstate` for the allowed moves."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"

    @property
    def terminal(self) -> bool:
        """Whether no further transition is possible from this state."""
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED)


@dataclass(frozen=True)
class BlobRef:
    """Stored content: its sha256 (lowercase hex) and size in bytes."""

    sha256: str
    size: int


@dataclass(frozen=True)
class Project:
    id: str
    name: str
    created_at: datetime


@dataclass(frozen=True)
class ApiToken:
    """An API token's metadata; the plaintext is never stored, only its sha256."""

    id: str
    project_id: str
    name: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class IssuedToken:
    """A freshly created token: the only time its plaintext is available."""

    token: ApiToken
    plaintext: str


@dataclass(frozen=True)
class Program:
    """One uploaded program (one row per upload)."""

    id: str
    project_id: str
    name: str
    sha256: str
    size_bytes: int
    methods: tuple[MethodSignature, ...]
    created_at: datetime


@dataclass(frozen=True)
class Artifact:
    """A `.pte` with its plan and report; ``program_id`` is None for an uploaded `.pte`."""

    id: str
    project_id: str
    program_id: str | None
    sha256: str
    size_bytes: int
    plan: JsonObject
    plan_hash: str
    report: JsonObject
    methods: tuple[MethodSignature, ...]
    created_at: datetime
    bundle_sha256: str | None = None  # its BundledProgram (.bpte), if its compile stored one
    data: BlobRef | None = None  # the .ptd holding the constants the .pte keeps outside


@dataclass(frozen=True)
class ModelVersion:
    """One version of a model: the artifact it serves."""

    version: int
    artifact_id: str
    created_at: datetime


@dataclass(frozen=True)
class ModelTokenizer:
    """The tokenizer attached to a model version: a ``tokenizer.json`` and, when given, its
    ``tokenizer_config.json`` (where a chat template comes from), both stored content."""

    tokenizer: BlobRef
    config: BlobRef | None
    created_at: datetime


@dataclass(frozen=True)
class ServedVersion:
    """What one model version serves, read in one go: its number, its artifact's ``.pte``
    content (and ``.ptd``) and the tokenizer attached to it (None when it has none)."""

    version: int
    program: BlobRef
    tokenizer: ModelTokenizer | None
    data: BlobRef | None = None  # the artifact's .ptd, if its .pte keeps constants outside


@dataclass(frozen=True)
class Model:
    """A stable name for a series of artifact versions, within one project (``project_name``
    names it). ``latest_version`` is None once every version was deleted: version numbers
    are never reused, so the model stays and keeps counting."""

    id: str
    project_id: str
    project_name: str
    name: str
    created_at: datetime
    latest_version: int | None


@dataclass(frozen=True)
class JobEvent:
    """A status or stage change of a job; ``version`` is the job's version right after it."""

    version: int
    status: JobStatus
    stage: str | None
    at: datetime
    attempt: int = 0  # the job's attempt at this change (0: never claimed yet)
    started_at: datetime | None = None  # when that attempt started
    retry_reason: str | None = None  # why an earlier attempt was abandoned, if one was


@dataclass(frozen=True)
class Job:
    """A unit of background work; ``version`` grows by one on every change (for polling)."""

    id: str
    project_id: str
    kind: str
    status: JobStatus
    stage: str | None
    payload: JsonObject
    error_code: str | None
    error_message: str | None
    artifact_id: str | None
    attempts: int
    max_attempts: int
    worker_id: str | None
    lease_expires_at: datetime | None
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    version: int
    retry_reason: str | None = None  # why the job last went back to the queue, if it did
    result: JsonObject | None = None  # what it produced besides an artifact (a profile)


@dataclass(frozen=True)
class WorkerBeat:
    """A compile worker process as its heartbeats describe it."""

    id: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    job_id: str | None  # the job it runs now, if any


@dataclass(frozen=True)
class StageTime:
    """How long one stage of a finished job took; ``outcome`` is how the job ended, or
    ``retried`` for a stage of an attempt that was abandoned."""

    stage: str
    outcome: str
    seconds: float


@dataclass(frozen=True)
class StoreSize:
    """How many rows of one kind the store holds and the bytes they account for."""

    kind: str
    count: int
    bytes: int
