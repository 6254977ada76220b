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
    with store.transaction() as tx:
        tx.projects.create(name) / get(id) / get_by_name(name) / get_or_create(name)
        tx.tokens.create(project_id, name) -> IssuedToken(token, plaintext)   # plaintext once
        tx.tokens.resolve(plaintext) -> (ApiToken, Project) | None; list(pid); revoke(pid, tid)
        tx.programs.create(project_id, name, blob: BlobRef, methods: Sequence[MethodSpec])
        tx.programs.get(project_id, id) -> Program | None   # other project's id: None too
        tx.programs.list(project_id) / delete(project_id, id) -> bool
        tx.artifacts.create(project_id, program_id | None, blob, plan, plan_hash, report,
                            methods)                       # ConflictError on same program+plan
        tx.artifacts.get(project_id, id) / get_any(id) / find_compiled(program_id, plan_hash)
        tx.artifacts.list(project_id) / delete(project_id, id) -> bool
        tx.jobs.enqueue(project_id, kind, payload, max_attempts=3) -> Job
        tx.jobs.get(project_id, id) / get_any(id) / list(project_id, status=None)
        tx.jobs.claim_next(worker_id, lease: timedelta, kinds=None) -> Job | None
        tx.jobs.heartbeat(job_id, worker_id, lease) -> bool  # False: lost or cancel requested
        tx.jobs.set_stage(job_id, worker_id, stage) / succeed(job_id, worker_id, artifact_id)
        tx.jobs.fail(job_id, worker_id, code, message) / acknowledge_cancel(job_id, worker_id)
        tx.jobs.cancel(project_id, id) -> Job | None; tx.jobs.reap_expired() -> list[Job]
    # Job.version grows on every change (poll get() for server-sent events).

    # Content: sha256-addressed, fixed-size chunks, streamed, deduplicated, verified on read.
    store.blobs.write(iterable_of_bytes) -> BlobRef(sha256, size)
    store.blobs.stat(sha) -> BlobRef | None; exists(sha) -> bool
    store.blobs.open(sha) -> Iterator[bytes]          # BlobNotFoundError at once
    store.blobs.read_range(sha, offset, length) -> Iterator[bytes]   # InvalidRangeError
    store.blobs.export_to_file(sha, path) -> BlobRef  # temp file, verified, atomic rename
    store.blobs.collect_garbage(older_than) -> int   # abandoned uploads, unreferenced content
    store.blobs.chunk_size                            # 1 MiB by default

Errors (``pteforge.storage.errors``): StorageError > NotFoundError > BlobNotFoundError;
ConflictError; BlobIntegrityError (content does not match its hash: never serve it);
InvalidRangeError; IllegalTransitionError > LeaseLostError. Domain objects (frozen dataclasses)
are in ``pteforge.storage.domain``; the interfaces in ``pteforge.storage.store`` and
``pteforge.storage.blobs``; the SQL implementation in ``pteforge.storage.sql``.
"""

from pteforge.storage.blobs import DEFAULT_CHUNK_SIZE, BlobStore
from pteforge.storage.domain import (
    ApiToken,
    Artifact,
    BlobRef,
    IssuedToken,
    Job,
    JobStatus,
    MethodSpec,
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
    "JobStatus",
    "LeaseLostError",
    "MethodSpec",
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
