"""The test tiers (``tests/tiers.py``): ``pytest --fast`` is ``make check``'s run, plain
``pytest`` (through ``tests/run-with-postgres.sh``) is ``make test``'s."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from tests import tiers

_TESTS = Path(__file__).parent

SERVER_FIXTURES = frozenset({"service", "secure_service", "api"})
"""Fixtures that start a ``pteforge`` process; their users (direct or not) are marked."""
POSTGRES_FIXTURES = frozenset({"postgres_url", "secure_service"})
DIRECTORY_MARKERS = {
    "browser": ("server",),
    "cluster": ("server", "postgres"),
    "security": ("server", "postgres"),
}
"""Suites whose every test belongs to the full tier, whatever its fixtures."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier (make check): skip tests marked "
        + ", ".join(tiers.TIERED)
        + ", and fail any other test that starts one of those resources",
    )


def _implied_markers(item: pytest.Item) -> set[str]:
    names = set(getattr(item, "fixturenames", ()))
    found = set()
    if names & SERVER_FIXTURES:
        found.add("server")
    if names & POSTGRES_FIXTURES:
        found.add("postgres")
    suite = item.path.relative_to(_TESTS).parts[0] if item.path.is_relative_to(_TESTS) else ""
    found.update(DIRECTORY_MARKERS.get(suite, ()))
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker in sorted(_implied_markers(item)):
            if item.get_closest_marker(marker) is None:
                item.add_marker(marker)
    fast = bool(config.getoption("--fast"))
    tiers.arm(fast)
    if not fast:
        return
    kept, dropped = [], []
    for item in items:
        tiered = any(item.get_closest_marker(m) for m in tiers.TIERED)
        (dropped if tiered else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    tiers.running(item)
    try:
        return (yield)
    finally:
        tiers.running(None)
