"""Fixtures running every storage test against a real SQLite file and a real PostgreSQL.

PostgreSQL comes from ``tests/run-with-postgres.sh`` (``PTEFORGE_TEST_POSTGRES_URL``); each test
gets a fresh database. Without that variable the PostgreSQL cases fail rather than skip, so a run
can never silently test only one database.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from pteforge.storage import SqlStore, default_sqlite_url, open_store

POSTGRES_ENV = "PTEFORGE_TEST_POSTGRES_URL"


@dataclass
class ManualClock:
    """A clock the test moves by hand, so lease expiry needs no sleeping."""

    now: datetime = field(default_factory=lambda: datetime(2030, 1, 1, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def _postgres_base_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.fail(
            f"{POSTGRES_ENV} is not set: run the storage tests through "
            "tests/run-with-postgres.sh (make test does) so PostgreSQL is tested too"
        )
    return url


def _admin_conninfo(url: str) -> str:
    parsed = make_url(url).set(drivername="postgresql", database="postgres")
    return parsed.render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh, empty database of each kind."""
    if request.param == "sqlite":
        yield default_sqlite_url(tmp_path / "home")
        return
    base = _postgres_base_url()
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = _admin_conninfo(base)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(database_url: str, clock: ManualClock) -> Iterator[SqlStore]:
    """A migrated store on a fresh database, with a manual clock and small (4 KiB) chunks."""
    opened = open_store(database_url, clock=clock, chunk_size=4096)
    try:
        yield opened
    finally:
        opened.close()
