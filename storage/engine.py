"""Creating SQLAlchemy engines for the two supported databases.

SQLite (the embedded default) runs in WAL mode with a busy timeout so several processes can share
one file; every writing transaction starts with ``BEGIN IMMEDIATE`` so a transaction that reads
before it writes never fails half-way on a lock upgrade. PostgreSQL is used as configured, with
a pool sized for a server's concurrent requests and a liveness check only where one is due.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Dialect, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry

from pteforge.storage.errors import StorageError

SQLITE_BUSY_TIMEOUT_S = 60.0
# Connections given this execution option open a plain deferred (read) transaction on SQLite.
READ_ONLY_OPTION = "pteforge_read_only"
# Connections kept open per process. A server answers up to this many requests that touch the
# database at once without opening a connection per request: SQLAlchemy's default (5, and 10
# more that are closed on return) made 16 clients open a PostgreSQL backend per request.
POOL_SIZE = 20
POOL_MAX_OVERFLOW = 20
# A pooled connection unused for longer than this is pinged before use (a PostgreSQL restart
# leaves dead ones behind). SQLAlchemy's pool_pre_ping pings on every checkout: one more round
# trip per transaction, a third of a /v1 read under load.
PING_AFTER_IDLE_S = 1.0
_CHECKED_IN_AT = "pteforge_checked_in_at"


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
        engine = create_engine(url, pool_size=POOL_SIZE, max_overflow=POOL_MAX_OVERFLOW)
        event.listen(engine, "checkin", _on_checkin)
        event.listen(engine, "checkout", _idle_pinger(engine.dialect))
        return engine
    raise StorageError(f"unsupported database {backend!r} in {url!r}: use sqlite or postgresql")


def _sqlite_engine(url: str, database: str | None) -> Engine:
    if not database or database == ":memory:":
        raise StorageError("SQLite store needs a file path (several processes share it)")
    Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S},
        pool_size=POOL_SIZE,
        max_overflow=POOL_MAX_OVERFLOW,
    )
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


def reader(engine: Engine) -> Engine:
    """``engine`` for transactions that only read. On SQLite they take no write lock. On
    PostgreSQL they run in autocommit: under READ COMMITTED each statement reads its own
    snapshot anyway, so BEGIN and COMMIT would only add two round trips."""
    read_only = engine.execution_options(**{READ_ONLY_OPTION: True})
    if engine.dialect.name == "postgresql":
        return read_only.execution_options(isolation_level="AUTOCOMMIT")
    return read_only


def _on_checkin(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info[_CHECKED_IN_AT] = time.monotonic()


def _idle_pinger(dialect: Dialect) -> Callable[[Any, ConnectionPoolEntry, Any], None]:
    """A pool ``checkout`` listener that pings a connection idle for ``PING_AFTER_IDLE_S``."""

    def ping_if_idle(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        checked_in_at = record.info.get(_CHECKED_IN_AT)
        if checked_in_at is None or time.monotonic() - checked_in_at < PING_AFTER_IDLE_S:
            return  # new, or in use a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as exc:
            # The pool discards this connection and checks out another (SQLAlchemy's
            # documented pessimistic disconnect handling).
            raise DisconnectionError(f"pooled connection is dead: {exc}") from exc

    return ping_if_idle
