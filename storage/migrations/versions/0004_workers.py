"""Workers heartbeat in their own table; jobs and their events record attempts and retries."""

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.String(200), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_workers"),
    )
    op.add_column("jobs", sa.Column("retry_reason", sa.Text(), nullable=True))
    with op.batch_alter_table("job_events") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("started_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("retry_reason", sa.Text(), nullable=True))
    # Events from before this revision get the job's current attempt and start time: the
    # best that is known about them.
    op.execute(
        "UPDATE job_events SET attempt = (SELECT attempts FROM jobs WHERE jobs.id = "
        "job_events.job_id), started_at = (SELECT started_at FROM jobs WHERE jobs.id = "
        "job_events.job_id)"
    )
    with op.batch_alter_table("job_events") as batch:
        batch.alter_column("attempt", existing_type=sa.Integer(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("job_events") as batch:
        batch.drop_column("retry_reason")
        batch.drop_column("started_at")
        batch.drop_column("attempt")
    op.drop_column("jobs", "retry_reason")
    op.drop_table("workers")
