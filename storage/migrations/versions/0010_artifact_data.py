"""An artifact's program data (.ptd, ExecuTorch's program-data separation): the file holding
the constants its .pte keeps outside, stored as content like its bundle, with
its size (the artifact object answers it, as the .pte's ``size_bytes``)."""

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"


def upgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.add_column(sa.Column("data_sha256", sa.String(64), nullable=True))
        batch.add_column(sa.Column("data_size", sa.BigInteger(), nullable=True))
        batch.create_foreign_key(
            "fk_artifacts_data_sha256_blobs", "blobs", ["data_sha256"], ["sha256"]
        )
        batch.create_index("ix_artifacts_data_sha256", ["data_sha256"])


def downgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.drop_index("ix_artifacts_data_sha256")
        batch.drop_constraint("fk_artifacts_data_sha256_blobs", type_="foreignkey")
        batch.drop_column("data_size")
        batch.drop_column("data_sha256")
