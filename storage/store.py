"""The abstract store interface: a unit of work with one repository per kind of row.

Implementations hand out domain objects (:mod:`pteforge.storage.domain`), never ORM rows.
Nothing commits on its own: the caller's ``with store.transaction() as tx:`` block commits when
it exits normally and rolls back when it raises.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from pteforge.storage.blobs import BlobStore
from pteforge.storage.domain import (
    ApiToken,
    Artifact,
    BlobRef,
    IssuedToken,
    JobStatus,
    MethodSignature,
    Program,
    Project,
    StageTime,
    StoreSize,
    WorkerBeat,
)
from pteforge.storage.jobs import JobRepository
from pteforge.storage.model_names import ModelRepository

_Content = TypeVar("_Content", Program, Artifact)


class ProjectRepository(ABC):
    @abstractmethod
    def create(self, name: str) -> Project:
        """A new project; raises ConflictError if the name is taken."""

    @abstractmethod
    def get(self, project_id: str) -> Project | None:
        """The project with this id, or None."""

    @abstractmethod
    def get_by_name(self, name: str) -> Project | None:
        """The project with this name, or None."""

    @abstractmethod
    def get_or_create(self, name: str) -> Project:
        """The project with this name, created if missing (safe against a concurrent create)."""

    @abstractmethod
    def stored_bytes(self, project_id: str, lock: bool = False) -> int:
        """The size of what the project stores: its programs, its artifacts (with their
        bundles and .ptd files) and its models' tokenizers, each counted in full even where
        another row or project shares the content. ``lock``: first lock the project's row until the
        transaction ends, so transactions that check this and then add content take turns."""


class TokenRepository(ABC):
    @abstractmethod
    def create(self, project_id: str, name: str) -> IssuedToken:
        """A new token; its plaintext is returned here once and only its sha256 is stored."""

    @abstractmethod
    def resolve(self, plaintext: str) -> tuple[ApiToken, Project] | None:
        """The live (not revoked) token with this plaintext and its project, or None."""

    @abstractmethod
    def list(self, project_id: str) -> list[ApiToken]:
        """The project's tokens, revoked ones included, oldest first."""

    @abstractmethod
    def revoke(self, project_id: str, token_id: str) -> bool:
        """Revoke a token; False if the project has no such token."""


class ContentRepository(ABC, Generic[_Content]):
    """Rows that reference stored content (programs, artifacts), seen within one project."""

    @abstractmethod
    def get(self, project_id: str, row_id: str) -> _Content | None:
        """The row, or None when absent or owned by another project (indistinguishable)."""

    @abstractmethod
    def list(self, project_id: str, limit: int = 100) -> builtins.list[_Content]:
        """The project's rows, newest first."""

    @abstractmethod
    def delete(self, project_id: str, row_id: str) -> bool:
        """Delete the row, and its content unless another row still references it."""


class ProgramRepository(ContentRepository[Program]):
    @abstractmethod
    def create(
        self, project_id: str, name: str, blob: BlobRef, methods: Sequence[MethodSignature]
    ) -> Program:
        """Record an uploaded program whose content is already in the blob store."""


class ArtifactRepository(ContentRepository[Artifact]):
    @abstractmethod
    def create(
        self,
        project_id: str,
        program_id: str | None,
        blob: BlobRef,
        plan: Mapping[str, Any],
        plan_hash: str,
        report: Mapping[str, Any],
        methods: Sequence[MethodSignature],
        bundle: BlobRef | None = None,
        data: BlobRef | None = None,
    ) -> Artifact:
        """Record a `.pte` (and ``bundle``, the same program as a BundledProgram with its
        test suite; ``data``, the `.ptd` holding the constants it keeps outside);
        ConflictError if (program_id, plan_hash) already has one."""

    @abstractmethod
    def get_any(self, artifact_id: str) -> Artifact | None:
        """The artifact whatever its project (for workers and the runtime)."""

    @abstractmethod
    def find_compiled(self, program_id: str, plan_hash: str) -> Artifact | None:
        """The artifact already compiled from this program with this plan, if any."""


class WorkerRepository(ABC):
    """Compile worker processes and their heartbeats (what keeps their jobs' leases)."""

    @abstractmethod
    def beat(self, worker_id: str, host: str, pid: int, lease: timedelta) -> None:
        """Record that the worker is alive now and extend the lease of every job it holds."""

    @abstractmethod
    def remove(self, worker_id: str) -> None:
        """Forget a worker that stopped on purpose."""

    @abstractmethod
    def forget_silent(self, older_than: timedelta) -> builtins.list[str]:
        """Forget workers with no heartbeat for ``older_than`` (their jobs' leases expire and
        :meth:`JobRepository.reap_expired` requeues them). Returns their ids."""

    @abstractmethod
    def list(self) -> builtins.list[WorkerBeat]:
        """Every worker that has not stopped or been forgotten, oldest first."""


class StatsRepository(ABC):
    """Aggregates for operations (metrics): counts and sizes, never another row's content."""

    @abstractmethod
    def job_counts(self) -> dict[tuple[JobStatus, str | None], int]:
        """Jobs by status and error code (None unless failed)."""

    @abstractmethod
    def oldest_queued_at(self) -> datetime | None:
        """When the longest-waiting queued job was queued (None: the queue is empty)."""

    @abstractmethod
    def stage_times(self, since: datetime, limit: int = 1000) -> builtins.list[StageTime]:
        """The time each stage took, in up to ``limit`` jobs that finished since ``since``,
        from their change logs; ``queued`` is the wait before each attempt."""

    @abstractmethod
    def sizes(self) -> builtins.list[StoreSize]:
        """Rows and bytes of content, programs, artifacts, jobs and job events."""


class Transaction(ABC):
    """One unit of work; all repositories share its database transaction."""

    projects: ProjectRepository
    tokens: TokenRepository
    programs: ProgramRepository
    artifacts: ArtifactRepository
    models: ModelRepository
    jobs: JobRepository
    workers: WorkerRepository
    stats: StatsRepository


class Store(ABC):
    """Everything pteforge persists: rows through transactions, content through ``blobs``."""

    blobs: BlobStore

    @abstractmethod
    def transaction(self, read_only: bool = False) -> AbstractContextManager[Transaction]:
        """A unit of work that commits when the ``with`` block exits without an exception.

        ``read_only=True`` promises the block only reads: on SQLite it then takes no write
        lock, so it never waits for writers (nor they for it)."""

    @abstractmethod
    def close(self) -> None:
        """Release database connections."""
