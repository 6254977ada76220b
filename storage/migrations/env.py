"""Alembic environment: always run on a connection handed in by pteforge.storage.schema."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from pteforge.storage.models import Base


def _run() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("run migrations through pteforge.storage.schema.upgrade_to_head")
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


_run()
