"""Initial schema: projects, tokens, chunked content-addressed blobs, programs, artifacts, jobs."""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None

_TS = sa.DateTime(timezone=True)
_ID = sa.String(64)

Item = sa.Column[Any] | sa.Constraint


def _col(name: str, type_: sa.types.TypeEngine[Any] = _ID, *, null: bool = False) -> Item:
    return sa.Column(name, type_, nullable=null)


def _fk(table: str, column: str, target: str, key: str = "id", ondelete: str | None = None) -> Item:
    """``table.column`` references ``target.key``; named ``fk_<table>_<column>_<target>``."""
    name = f"fk_{table}_{column}_{target}"
    return sa.ForeignKeyConstraint([column], [f"{target}.{key}"], ondelete=ondelete, name=name)


def _owner() -> tuple[Item, Item]:
    """The columns of a row a project owns: its ``id`` and ``project_id``."""
    return _col("id"), _col("project_id")


def _owner_keys(table: str) -> tuple[Item, Item]:
    """The ``id`` key and the ``project_id`` reference of an owned row (gone with its project)."""
    return (
        sa.PrimaryKeyConstraint("id", name=f"pk_{table}"),
        _fk(table, "project_id", "projects", ondelete="CASCADE"),
    )


def _content() -> tuple[Item, Item]:
    """A row's stored content: the ``blob_sha256`` and ``size_bytes`` columns."""
    return _col("blob_sha256"), _col("size_bytes", sa.BigInteger())


def _content_key(table: str) -> Item:
    return _fk(table, "blob_sha256", "blobs", key="sha256")


def _index(table: str, *columns: str) -> None:
    """An index named ``ix_<table>_<columns>``."""
    op.create_index(f"ix_{table}_{'_'.join(columns)}", table, list(columns))


def upgrade() -> None:
    _projects_and_tokens()
    _blobs()
    _programs_and_artifacts()
    _jobs()


def _projects_and_tokens() -> None:
    op.create_table(
        "projects",
        _col("id"),
        _col("name", sa.String(200)),
        _col("created_at", _TS),
        sa.PrimaryKeyConstraint("id", name="pk_projects"),
        sa.UniqueConstraint("name", name="uq_projects_name"),
    )
    op.create_table(
        "api_tokens",
        *_owner(),
        _col("name", sa.String(200)),
        _col("token_sha256"),
        _col("created_at", _TS),
        _col("revoked_at", _TS, null=True),
        *_owner_keys("api_tokens"),
        sa.UniqueConstraint("token_sha256", name="uq_api_tokens_token_sha256"),
    )
    _index("api_tokens", "project_id")


def _blobs() -> None:
    op.create_table(
        "blob_uploads",
        _col("id"),
        _col("started_at", _TS),
        sa.PrimaryKeyConstraint("id", name="pk_blob_uploads"),
    )
    _index("blob_uploads", "started_at")
    op.create_table(
        "blob_chunks",
        _col("upload_id"),
        _col("seq", sa.Integer()),
        _col("sha256"),
        _col("data", sa.LargeBinary()),
        sa.PrimaryKeyConstraint("upload_id", "seq", name="pk_blob_chunks"),
        _fk("blob_chunks", "upload_id", "blob_uploads", ondelete="CASCADE"),
    )
    if op.get_context().dialect.name == "postgresql":
        # Chunks are mostly compressed weights: skip TOAST's futile compression attempt.
        op.execute("ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL")
    op.create_table(
        "blobs",
        _col("sha256"),
        _col("size", sa.BigInteger()),
        _col("chunk_size", sa.Integer()),
        _col("upload_id"),
        _col("created_at", _TS),
        sa.PrimaryKeyConstraint("sha256", name="pk_blobs"),
        _fk("blobs", "upload_id", "blob_uploads"),
        sa.UniqueConstraint("upload_id", name="uq_blobs_upload_id"),
    )


def _programs_and_artifacts() -> None:
    op.create_table(
        "programs",
        *_owner(),
        _col("name", sa.String(200)),
        *_content(),
        _col("methods", sa.JSON()),
        _col("created_at", _TS),
        *_owner_keys("programs"),
        _content_key("programs"),
    )
    _index("programs", "project_id")
    _index("programs", "blob_sha256")
    op.create_table(
        "artifacts",
        *_owner(),
        _col("program_id", null=True),
        *_content(),
        _col("plan", sa.JSON()),
        _col("plan_hash"),
        _col("report", sa.JSON()),
        _col("methods", sa.JSON()),
        _col("created_at", _TS),
        *_owner_keys("artifacts"),
        _fk("artifacts", "program_id", "programs", ondelete="SET NULL"),
        _content_key("artifacts"),
        sa.UniqueConstraint("program_id", "plan_hash", name="uq_artifacts_program_id_plan_hash"),
    )
    _index("artifacts", "project_id")
    _index("artifacts", "blob_sha256")


def _jobs() -> None:
    op.create_table(
        "jobs",
        *_owner(),
        _col("kind"),
        _col("status", sa.String(16)),
        _col("stage", sa.String(200), null=True),
        _col("payload", sa.JSON()),
        _col("error_code", null=True),
        _col("error_message", sa.Text(), null=True),
        _col("artifact_id", null=True),
        _col("attempts", sa.Integer()),
        _col("max_attempts", sa.Integer()),
        _col("worker_id", sa.String(200), null=True),
        _col("lease_expires_at", _TS, null=True),
        _col("cancel_requested", sa.Boolean()),
        _col("created_at", _TS),
        _col("started_at", _TS, null=True),
        _col("finished_at", _TS, null=True),
        _col("updated_at", _TS),
        _col("version", sa.Integer()),
        *_owner_keys("jobs"),
        _fk("jobs", "artifact_id", "artifacts", ondelete="SET NULL"),
    )
    _index("jobs", "project_id")
    _index("jobs", "status", "created_at")
    _index("jobs", "status", "lease_expires_at")


def downgrade() -> None:
    for table in ("jobs", "artifacts", "programs", "blobs", "blob_chunks", "blob_uploads"):
        op.drop_table(table)
    op.drop_table("api_tokens")
    op.drop_table("projects")
