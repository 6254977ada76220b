"""Bringing a database's schema to the newest Alembic revision, safely from several processes."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, text

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
    serialise and the later ones find the schema already at head. On SQLite, foreign keys are
    off meanwhile (SQLite's own recipe for changing a table): a batch migration copies a table
    and drops the old one, which with them on failed on rows other tables reference (or
    would have run their ON DELETE actions); the keys are checked before the commit instead.
    """
    config = alembic_config()
    with engine.connect() as outer:
        sqlite = outer.dialect.name == "sqlite"
        if sqlite:  # outside any transaction, where SQLite takes it
            outer.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
        try:
            with outer.begin():
                _upgrade(outer, config)
        finally:
            if sqlite:
                outer.connection.driver_connection.execute("PRAGMA foreign_keys=ON")  # type: ignore[union-attr]


def _upgrade(connection: Connection, config: Config) -> None:
    """The migrations, in ``connection``'s transaction (see :func:`upgrade_to_head`)."""
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
    if connection.dialect.name == "sqlite":
        broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise StorageError(f"a migration left rows whose foreign keys fail: {broken[:5]}")
