"""pteforge.storage: where every uploaded program, compiled artifact and job lives.

SQLite (a file under ``PTEFORGE_HOME``, WAL mode) is the embedded default; PostgreSQL
(``postgresql+psycopg://...``) is the production database. The schema comes only from the
Alembic migrations in ``storage/migrations``. Storage reads no environment: callers pass URLs.

Public API (stable; the server codes against it)::

    from pteforge.storage import open_store, default_sqlite_url
    store = open_store(url)            # runs migrations to head; safe from concurrent processes
    store = open_store(url, migrate=False)          # just connect (workers)
    default_sqlite_url(home: Path) -> str           # sqlite+pysqlite:///<home>/pteforge.db

    # Rows: a unit of work; commits when the block exits normally, rolls back on error.
    with store.transaction() as tx:   # transaction(read_only=True): no SQLite write lock
        tx.projects.create(name) / get(id) / get_by_name(name) / get_or_create(name)
        tx.projects.stored_bytes(project_id, lock=False) -> int   # programs, artifacts, tokenizers
        tx.tokens.create(project_id, name) -> IssuedToken(token, plaintext)   # plaintext once
        tx.tokens.resolve(plaintext) -> (ApiToken, Project) | None; list(pid); revoke(pid, tid)
        tx.programs.create(project_id, name, blob: BlobRef, methods: Sequence[MethodSignature])
        tx.programs.get(project_id, id) -> Program | None   # other project's id: None too
        tx.programs.list(project_id) / delete(project_id, id) -> bool
        tx.artifacts.create(project_id, program_id | None, blob, plan, plan_hash, report,
                            methods)                       # ConflictError on same program+plan
        tx.artifacts.get(project_id, id) / get_any(id) / find_compiled(program_id, plan_hash)
        tx.artifacts.list(project_id) / delete(project_id, id) -> bool  # ConflictError while
                                                   # a model version serves the artifact
        tx.models.add_version(project_id, name, artifact_id) -> ModelVersion  # 1, 2, ...
        tx.models.get(project_id, name) / list(project_id) / versions(project_id, name)
        tx.models.artifact_id(project_id, name, version=None)  # None: the latest version
        tx.models.delete_version(project_id, name, version) -> bool  # numbers never reused
        tx.jobs.enqueue(project_id, kind, payload, max_attempts=3,
                        unfinished_limit=None) -> Job   # QueueFullError past the limit
        tx.jobs.get(project_id, id) / get_any(id) / list(project_id, status=None)
        tx.jobs.claim_next(worker_id, lease: timedelta, kinds=None) -> Job | None
        tx.jobs.heartbeat(job_id, worker_id, lease) -> bool  # False: lost or cancel requested
        tx.jobs.set_stage(job_id, worker_id, stage) / succeed(job_id, worker_id, artifact_id)
        tx.jobs.fail(job_id, worker_id, code, message) / acknowledge_cancel(job_id, worker_id)
        tx.jobs.cancel(project_id, id) -> Job | None; tx.jobs.reap_expired() -> list[Job]
        tx.jobs.release(job_id, worker_id, reason) -> Job | None   # a stopping worker: not counted
        tx.jobs.retry(job_id, worker_id, code, reason) -> Job  # the attempt crashed: counted
        tx.workers.beat(worker_id, host, pid, lease) / remove(id) / forget_silent(age) / list()
        tx.stats.job_counts() / oldest_queued_at() / stage_times(since) / sizes()  # metrics
        tx.jobs.delete_finished(older_than: timedelta, limit=1000) -> int
        tx.jobs.events(project_id, id, after_version=0) -> list[JobEvent]  # change log
    # Job.version grows on every change; each status or stage change is logged under it.

    # Content: sha256-addressed, fixed-size chunks, streamed, deduplicated, verified on read.
    store.blobs.write(iterable_of_bytes) -> BlobRef(sha256, size)
    store.blobs.stat(sha) -> BlobRef | None; exists(sha) -> bool
    store.blobs.open(sha) -> Iterator[bytes]          # BlobNotFoundError at once
    store.blobs.read_range(sha, offset, length) -> Iterator[bytes]   # InvalidRangeError
    store.blobs.export_to_file(sha, path) -> BlobRef  # temp file, verified, atomic rename
    store.blobs.collect_garbage(older_than) -> int   # abandoned uploads, unreferenced content
    store.blobs.chunk_size                            # 1 MiB by default

Errors (``pteforge.storage.errors``): StorageError > NotFoundError > BlobNotFoundError;
ConflictError; QueueFullError; BlobIntegrityError (content does not match its hash: never serve it);
InvalidRangeError; IllegalTransitionError > LeaseLostError. Domain objects (frozen dataclasses)
are in ``pteforge.storage.domain``; the interfaces in ``pteforge.storage.store`` (with
``jobs`` and ``model_names``) and ``pteforge.storage.blobs``; the SQL implementation in
``pteforge.storage.sql``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pteforge.lazy import lazy_exports

if TYPE_CHECKING:
    from pteforge.storage.blobs import DEFAULT_CHUNK_SIZE, BlobStore
    from pteforge.storage.domain import (
        ApiToken,
        Artifact,
        BlobRef,
        IssuedToken,
        Job,
        JobEvent,
        JobStatus,
        MethodSignature,
        Program,
        Project,
        TensorSpec,
        methods_from_json,
        methods_to_json,
    )
    from pteforge.storage.engine import default_sqlite_url
    from pteforge.storage.errors import (
        BlobIntegrityError,
        BlobNotFoundError,
        ConflictError,
        IllegalTransitionError,
        InvalidRangeError,
        LeaseLostError,
        NotFoundError,
        StorageError,
    )
    from pteforge.storage.sql.store import SqlStore, open_store
    from pteforge.storage.store import Store, Transaction

# Names load on first use: a sandboxed loader that needs only the domain objects must not
# pay for SQLAlchemy (0.4 s) by importing this package.
_SOURCES: dict[str, str] = {
    "DEFAULT_CHUNK_SIZE": "pteforge.storage.blobs",
    "BlobStore": "pteforge.storage.blobs",
    "ApiToken": "pteforge.storage.domain",
    "Artifact": "pteforge.storage.domain",
    "BlobRef": "pteforge.storage.domain",
    "IssuedToken": "pteforge.storage.domain",
    "Job": "pteforge.storage.domain",
    "JobEvent": "pteforge.storage.domain",
    "JobStatus": "pteforge.storage.domain",
    "MethodSignature": "pteforge.storage.domain",
    "Program": "pteforge.storage.domain",
    "Project": "pteforge.storage.domain",
    "TensorSpec": "pteforge.storage.domain",
    "methods_from_json": "pteforge.storage.domain",
    "methods_to_json": "pteforge.storage.domain",
    "default_sqlite_url": "pteforge.storage.engine",
    "BlobIntegrityError": "pteforge.storage.errors",
    "BlobNotFoundError": "pteforge.storage.errors",
    "ConflictError": "pteforge.storage.errors",
    "IllegalTransitionError": "pteforge.storage.errors",
    "InvalidRangeError": "pteforge.storage.errors",
    "LeaseLostError": "pteforge.storage.errors",
    "NotFoundError": "pteforge.storage.errors",
    "StorageError": "pteforge.storage.errors",
    "SqlStore": "pteforge.storage.sql.store",
    "open_store": "pteforge.storage.sql.store",
    "Store": "pteforge.storage.store",
    "Transaction": "pteforge.storage.store",
}

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ApiToken",
    "Artifact",
    "BlobIntegrityError",
    "BlobNotFoundError",
    "BlobRef",
    "BlobStore",
    "ConflictError",
    "IllegalTransitionError",
    "InvalidRangeError",
    "IssuedToken",
    "Job",
    "JobEvent",
    "JobStatus",
    "LeaseLostError",
    "MethodSignature",
    "NotFoundError",
    "Program",
    "Project",
    "SqlStore",
    "StorageError",
    "Store",
    "TensorSpec",
    "Transaction",
    "default_sqlite_url",
    "methods_from_json",
    "methods_to_json",
    "open_store",
]

__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)
