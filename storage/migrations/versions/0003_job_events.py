"""Jobs keep a log of their status and stage changes, so no stage is lost between polls."""

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"


def upgrade() -> None:
    op.create_table(
        "job_events",
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stage", sa.String(200), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "version", name="pk_job_events"),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], ondelete="CASCADE", name="fk_job_events_job_id_jobs"
        ),
    )
    # Jobs from before the log start it with the state they are in now.
    op.execute(
        "INSERT INTO job_events (job_id, version, status, stage, at) "
        "SELECT id, version, status, stage, updated_at FROM jobs"
    )


def downgrade() -> None:
    op.drop_table("job_events")
