"""Bringing a database's schema to the newest Alembic revision, safely from several processes."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Engine, text

from pteforge.storage.errors import StorageError

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Any constant works; it only has to be the same for every pteforge process.
_PG_MIGRATION_LOCK_KEY = 7_146_592_031


def alembic_config() -> Config:
    """An Alembic config pointing at the storage migrations (no alembic.ini needed)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def upgrade_to_head(engine: Engine) -> None:
    """Apply every pending migration.

    All of it runs in one transaction that first takes a database-wide lock (an advisory lock on
    PostgreSQL, the write lock via ``BEGIN IMMEDIATE`` on SQLite), so concurrent starts
    serialise and the later ones find the schema already at head.
    """
    config = alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK_KEY}
            )
        config.attributes["connection"] = connection
        try:
            command.upgrade(config, "head")
        except CommandError as exc:  # the database's revision is none of ours
            raise StorageError(
                f"{exc}: the schema is from a newer pteforge; run that version (or restore "
                "the backup taken before its upgrade)"
            ) from exc
