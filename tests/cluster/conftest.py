"""Fixtures of the cluster tests: a fresh PostgreSQL database from the server that
``tests/run-with-postgres.sh`` started (these tests fail rather than skip without it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import fresh_database


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """The URL of a new, empty database, dropped after the module."""
    with fresh_database("cl") as url:
        yield url
