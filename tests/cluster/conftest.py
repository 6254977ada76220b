"""Fixtures of the cluster tests: a fresh PostgreSQL database from the server that
``tests/run-with-postgres.sh`` started (these tests fail rather than skip without it)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

POSTGRES_ENV = "PTEFORGE_TEST_POSTGRES_URL"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """The URL of a new, empty database, dropped after the module."""
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.fail(f"{POSTGRES_ENV} is not set: run through tests/run-with-postgres.sh")
    name = f"cl_{uuid.uuid4().hex[:16]}"
    admin = make_url(base).set(drivername="postgresql", database="postgres")
    conninfo = admin.render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
