"""Model names: a project's stable names for series of artifact versions."""

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("next_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_models"),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            ondelete="CASCADE",
            name="fk_models_project_id_projects",
        ),
        sa.UniqueConstraint("project_id", "name", name="uq_models_project_id_name"),
    )
    op.create_index("ix_models_project_id", "models", ["project_id"])
    op.create_table(
        "model_versions",
        sa.Column("model_id", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("artifact_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "version", name="pk_model_versions"),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            ondelete="CASCADE",
            name="fk_model_versions_model_id_models",
        ),
        sa.ForeignKeyConstraint(
            ["artifact_id"], ["artifacts.id"], name="fk_model_versions_artifact_id_artifacts"
        ),
    )
    op.create_index("ix_model_versions_artifact_id", "model_versions", ["artifact_id"])


def downgrade() -> None:
    op.drop_table("model_versions")
    op.drop_table("models")
