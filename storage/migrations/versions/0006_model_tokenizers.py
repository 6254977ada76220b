"""Tokenizers attached to model versions (issue 21): a ``tokenizer.json`` and an optional
``tokenizer_config.json`` per version, stored as content like programs and artifacts."""

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"


def upgrade() -> None:
    op.create_table(
        "model_tokenizers",
        sa.Column("model_id", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("tokenizer_sha256", sa.String(64), nullable=False),
        sa.Column("tokenizer_size", sa.BigInteger(), nullable=False),
        sa.Column("config_sha256", sa.String(64), nullable=True),
        sa.Column("config_size", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "version", name="pk_model_tokenizers"),
        sa.ForeignKeyConstraint(
            ["model_id", "version"],
            ["model_versions.model_id", "model_versions.version"],
            ondelete="CASCADE",
            name="fk_model_tokenizers_model_id_model_versions",
        ),
        sa.ForeignKeyConstraint(
            ["tokenizer_sha256"],
            ["blobs.sha256"],
            name="fk_model_tokenizers_tokenizer_sha256_blobs",
        ),
        sa.ForeignKeyConstraint(
            ["config_sha256"], ["blobs.sha256"], name="fk_model_tokenizers_config_sha256_blobs"
        ),
    )
    op.create_index(
        "ix_model_tokenizers_tokenizer_sha256", "model_tokenizers", ["tokenizer_sha256"]
    )
    op.create_index("ix_model_tokenizers_config_sha256", "model_tokenizers", ["config_sha256"])


def downgrade() -> None:
    op.drop_table("model_tokenizers")
