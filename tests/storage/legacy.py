"""Databases left by an older release: the schema migrated only up to a given revision, rows
written as that release wrote them, then the current store opened over them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from alembic import command
from sqlalchemy import Connection, text

from pteforge.storage import SqlStore, open_store
from pteforge.storage.engine import create_store_engine
from pteforge.storage.schema import alembic_config

_OLD_JOB: dict[str, Any] = {
    "id": "job_old",
    "project_id": "prj_old",
    "kind": "compile",
    "payload": "{}",
    "max_attempts": 3,
    "cancel_requested": False,
}


@contextmanager
def schema_at(database_url: str, revision: str) -> Iterator[Connection]:
    """A connection (one committed transaction) to the database migrated up to ``revision``."""
    engine = create_store_engine(database_url)
    config = alembic_config()
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
            yield conn
    finally:
        engine.dispose()


@contextmanager
def current_store(database_url: str) -> Iterator[SqlStore]:
    """The store opened (and so migrated to the head) over the old database, closed on exit."""
    store = open_store(database_url)
    try:
        yield store
    finally:
        store.close()


def insert_old_job(conn: Connection, now: datetime, **columns: Any) -> None:
    """Project ``prj_old`` and its job ``job_old``, created and updated at ``now``."""
    conn.execute(text("INSERT INTO projects VALUES ('prj_old', 'old', :now)"), {"now": now})
    row = {**_OLD_JOB, "created_at": now, "updated_at": now, **columns}
    names = ", ".join(row)
    values = ", ".join(f":{name}" for name in row)
    conn.execute(text(f"INSERT INTO jobs ({names}) VALUES ({values})"), row)
