"""Initial schema: projects, tokens, chunked content-addressed blobs, programs, artifacts, jobs."""

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    _projects_and_tokens()
    _blobs()
    _programs_and_artifacts()
    _jobs()


def _projects_and_tokens() -> None:
    op.create_table(
        "projects",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_projects"),
        sa.UniqueConstraint("name", name="uq_projects_name"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("revoked_at", _TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            ondelete="CASCADE",
            name="fk_api_tokens_project_id_projects",
        ),
        sa.UniqueConstraint("token_sha256", name="uq_api_tokens_token_sha256"),
    )
    op.create_index("ix_api_tokens_project_id", "api_tokens", ["project_id"])


def _blobs() -> None:
    op.create_table(
        "blob_uploads",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("started_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_blob_uploads"),
    )
    op.create_index("ix_blob_uploads_started_at", "blob_uploads", ["started_at"])
    op.create_table(
        "blob_chunks",
        sa.Column("upload_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("upload_id", "seq", name="pk_blob_chunks"),
        sa.ForeignKeyConstraint(
            ["upload_id"],
            ["blob_uploads.id"],
            ondelete="CASCADE",
            name="fk_blob_chunks_upload_id_blob_uploads",
        ),
    )
    if op.get_context().dialect.name == "postgresql":
        # Chunks are mostly compressed weights: skip TOAST's futile compression attempt.
        op.execute("ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL")
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("chunk_size", sa.Integer(), nullable=False),
        sa.Column("upload_id", sa.String(64), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("sha256", name="pk_blobs"),
        sa.ForeignKeyConstraint(
            ["upload_id"], ["blob_uploads.id"], name="fk_blobs_upload_id_blob_uploads"
        ),
        sa.UniqueConstraint("upload_id", name="uq_blobs_upload_id"),
    )


def _programs_and_artifacts() -> None:
    op.create_table(
        "programs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("blob_sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("methods", sa.JSON(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_programs"),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            ondelete="CASCADE",
            name="fk_programs_project_id_projects",
        ),
        sa.ForeignKeyConstraint(
            ["blob_sha256"], ["blobs.sha256"], name="fk_programs_blob_sha256_blobs"
        ),
    )
    op.create_index("ix_programs_project_id", "programs", ["project_id"])
    op.create_index("ix_programs_blob_sha256", "programs", ["blob_sha256"])
    op.create_table(
        "artifacts",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("program_id", sa.String(64), nullable=True),
        sa.Column("blob_sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("plan_hash", sa.String(64), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("methods", sa.JSON(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_artifacts"),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            ondelete="CASCADE",
            name="fk_artifacts_project_id_projects",
        ),
        sa.ForeignKeyConstraint(
            ["program_id"],
            ["programs.id"],
            ondelete="SET NULL",
            name="fk_artifacts_program_id_programs",
        ),
        sa.ForeignKeyConstraint(
            ["blob_sha256"], ["blobs.sha256"], name="fk_artifacts_blob_sha256_blobs"
        ),
        sa.UniqueConstraint("program_id", "plan_hash", name="uq_artifacts_program_id_plan_hash"),
    )
    op.create_index("ix_artifacts_project_id", "artifacts", ["project_id"])
    op.create_index("ix_artifacts_blob_sha256", "artifacts", ["blob_sha256"])


def _jobs() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stage", sa.String(200), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("artifact_id", sa.String(64), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(200), nullable=True),
        sa.Column("lease_expires_at", _TS, nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("started_at", _TS, nullable=True),
        sa.Column("finished_at", _TS, nullable=True),
        sa.Column("updated_at", _TS, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            ondelete="CASCADE",
            name="fk_jobs_project_id_projects",
        ),
        sa.ForeignKeyConstraint(
            ["artifact_id"],
            ["artifacts.id"],
            ondelete="SET NULL",
            name="fk_jobs_artifact_id_artifacts",
        ),
    )
    op.create_index("ix_jobs_project_id", "jobs", ["project_id"])
    op.create_index("ix_jobs_status_created_at", "jobs", ["status", "created_at"])
    op.create_index("ix_jobs_status_lease_expires_at", "jobs", ["status", "lease_expires_at"])


def downgrade() -> None:
    for table in ("jobs", "artifacts", "programs", "blobs", "blob_chunks", "blob_uploads"):
        op.drop_table(table)
    op.drop_table("api_tokens")
    op.drop_table("projects")
