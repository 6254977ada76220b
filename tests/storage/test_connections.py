"""The PostgreSQL connection pool: connections stay open under concurrency, and a connection
that died while idle (a server restart) is replaced before use without failing the caller."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine, event, text

from pteforge.storage import SqlStore
from pteforge.storage import engine as engine_settings
from pteforge.storage.errors import StorageError

# conftest's store and database_url fixtures, PostgreSQL only
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
]


def _kill_other_backends(url: str) -> int:
    """What a database restart does to a pool: every server-side session ends."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).scalar_one()
            )
    finally:
        admin.dispose()


def _read(store: SqlStore, name: str) -> str | None:
    with store.transaction(read_only=True) as tx:
        project = tx.projects.get_by_name(name)
    return None if project is None else project.id


def test_concurrent_requests_reuse_pooled_connections(store: SqlStore) -> None:
    opened = []
    event.listen(store.engine, "connect", lambda *_: opened.append(1))
    with store.transaction() as tx:
        tx.projects.create("p")
    with ThreadPoolExecutor(16) as threads:  # as many as a server's concurrent requests
        for _ in range(25):
            assert all(list(threads.map(lambda _: _read(store, "p"), range(16))))
    # 400 transactions, at most 16 at once: no connection was opened and closed per request
    assert 1 <= len(opened) <= 16


def test_a_connection_dead_while_idle_is_replaced_before_use(
    store: SqlStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.transaction() as tx:
        project = tx.projects.create("p")
    monkeypatch.setattr(engine_settings, "PING_AFTER_IDLE_S", 0.0)  # every connection is idle
    assert _kill_other_backends(database_url) >= 1
    assert _read(store, "p") == project.id  # pinged, found dead, replaced
    assert _kill_other_backends(database_url) >= 1
    with store.transaction() as tx:  # writers too
        tx.projects.create("q")
    assert _read(store, "q") is not None


def test_a_connection_used_a_moment_ago_is_not_pinged(
    store: SqlStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The price of pinging only idle connections: a restart within ``PING_AFTER_IDLE_S`` of
    the last use fails one transaction, which also clears the pool for the next one."""
    with store.transaction() as tx:
        project = tx.projects.create("p")
    monkeypatch.setattr(engine_settings, "PING_AFTER_IDLE_S", 3600.0)
    assert _kill_other_backends(database_url) >= 1
    with pytest.raises(StorageError, match="database error"):
        _read(store, "p")
    assert _read(store, "p") == project.id
