"""Workers take the next job from the project they served longest ago (storage/sql/jobs.py):
an index finds a project's latest start without reading its job history."""

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"


def upgrade() -> None:
    op.create_index("ix_jobs_project_id_started_at", "jobs", ["project_id", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_jobs_project_id_started_at", table_name="jobs")
