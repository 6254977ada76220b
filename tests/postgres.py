"""A fresh PostgreSQL database per test or module, on the server ``tests/run-with-postgres.sh``
started (``PTEFORGE_TEST_POSTGRES_URL``). Without that variable the caller fails rather than
skips, so a run can never silently test only SQLite."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url

from tests import tiers

POSTGRES_ENV = "PTEFORGE_TEST_POSTGRES_URL"


def postgres_base_url() -> str:
    """The server's URL; fails the test when ``tests/run-with-postgres.sh`` did not set it."""
    tiers.need("postgres")
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.fail(
            f"{POSTGRES_ENV} is not set: run through tests/run-with-postgres.sh "
            "(make test does) so PostgreSQL is tested too"
        )
    return url


@contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """The URL of a new, empty database named ``<prefix>_<random>``, dropped on exit."""
    base = postgres_base_url()
    name = f"{prefix}_{uuid.uuid4().hex[:16]}"
    admin = make_url(base).set(drivername="postgresql", database="postgres")
    conninfo = admin.render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def wait_for_a_row_lock(engine: Engine, deadline_s: float = 30.0) -> None:
    """Poll until another session of the server waits for a row lock (a test's concurrent
    transaction has reached the lock it is about), within ``deadline_s``."""
    query = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
    deadline = time.monotonic() + deadline_s
    with engine.connect() as watcher:
        while watcher.execute(query).scalar_one() < 1:
            assert time.monotonic() < deadline, "nothing waited for a row lock"
            watcher.rollback()
            time.sleep(0.01)
