"""Chunks record a BLAKE3 digest of their bytes; the SHA-256 stays only for older chunks."""

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"


def upgrade() -> None:
    with op.batch_alter_table("blob_chunks") as batch:
        batch.add_column(sa.Column("blake3", sa.String(64), nullable=True))
        batch.alter_column("sha256", existing_type=sa.String(64), nullable=True)


def downgrade() -> None:
    written_since = op.get_bind().execute(
        sa.text("SELECT count(*) FROM blob_chunks WHERE sha256 IS NULL")
    )
    if written_since.scalar_one():
        raise RuntimeError("chunks written since 0002 have no SHA-256: 0001 cannot read them")
    with op.batch_alter_table("blob_chunks") as batch:
        batch.alter_column("sha256", existing_type=sa.String(64), nullable=False)
        batch.drop_column("blake3")
