"""Creating SQLAlchemy engines for the two supported databases.

SQLite (the embedded default) runs in WAL mode with a busy timeout so several processes can share
one file; every writing transaction starts with ``BEGIN IMMEDIATE`` so a transaction that reads
before it writes never fails half-way on a lock upgrade. PostgreSQL is used as configured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from pteforge.storage.errors import StorageError

SQLITE_BUSY_TIMEOUT_S = 60.0
# Connections given this execution option open a plain deferred (read) transaction on SQLite.
READ_ONLY_OPTION = "pteforge_read_only"


def default_sqlite_url(home: Path) -> str:
    """The URL of the embedded database under ``home`` (the server passes ``PTEFORGE_HOME``)."""
    return f"sqlite+pysqlite:///{(home.expanduser() / 'pteforge.db').resolve()}"


def create_store_engine(url: str) -> Engine:
    """An engine for ``url`` (SQLite or PostgreSQL), configured for concurrent processes."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StorageError(f"invalid database URL {url!r}: {exc}") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url, parsed.database)
    if backend == "postgresql":
        return create_engine(url, pool_pre_ping=True)
    raise StorageError(f"unsupported database {backend!r} in {url!r}: use sqlite or postgresql")


def _sqlite_engine(url: str, database: str | None) -> Engine:
    if not database or database == ":memory:":
        raise StorageError("SQLite store needs a file path (several processes share it)")
    Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from the sqlite3 module; _on_sqlite_begin emits BEGIN.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    # Large pages: chunks are 1 MiB blobs (only takes effect when the file is created).
    cursor.execute("PRAGMA page_size=65536")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
    cursor.close()


def _on_sqlite_begin(conn: Connection) -> None:
    read_only = conn.get_execution_options().get(READ_ONLY_OPTION, False)
    conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")
