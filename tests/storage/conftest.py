"""Fixtures running every storage test against a real SQLite file and a real PostgreSQL.

PostgreSQL comes from ``tests/run-with-postgres.sh`` (``PTEFORGE_TEST_POSTGRES_URL``); each test
gets a fresh database. Without that variable the PostgreSQL cases fail rather than skip, so a run
can never silently test only one database.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pteforge.storage import SqlStore, default_sqlite_url, open_store
from tests.postgres import fresh_database


@dataclass
class ManualClock:
    """A clock the test moves by hand, so lease expiry needs no sleeping."""

    now: datetime = field(default_factory=lambda: datetime(2030, 1, 1, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh, empty database of each kind."""
    if request.param == "sqlite":
        yield default_sqlite_url(tmp_path / "home")
        return
    with fresh_database("t") as url:
        yield url


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


def new_artifact(store: SqlStore, project_id: str, source: str) -> str:
    """A stored artifact of random content (``source``: what made it)."""
    blob = store.blobs.write([os.urandom(64)])
    with store.transaction() as tx:
        return tx.artifacts.create(project_id, None, blob, {}, source, {}, []).id


def new_project(store: SqlStore, name: str) -> str:
    """A new project's id."""
    with store.transaction() as tx:
        return tx.projects.create(name).id


def add_version(store: SqlStore, project_id: str, name: str, artifact_id: str) -> int:
    """The number of the version of model ``name`` added for ``artifact_id``."""
    with store.transaction() as tx:
        return tx.models.add_version(project_id, name, artifact_id).version
