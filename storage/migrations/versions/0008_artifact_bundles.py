"""An artifact's BundledProgram (issue 19): the .bpte its compile stored, as content."""

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"


def upgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.add_column(sa.Column("bundle_sha256", sa.String(64), nullable=True))
        batch.create_foreign_key(
            "fk_artifacts_bundle_sha256_blobs", "blobs", ["bundle_sha256"], ["sha256"]
        )
        batch.create_index("ix_artifacts_bundle_sha256", ["bundle_sha256"])


def downgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.drop_index("ix_artifacts_bundle_sha256")
        batch.drop_constraint("fk_artifacts_bundle_sha256_blobs", type_="foreignkey")
        batch.drop_column("bundle_sha256")
