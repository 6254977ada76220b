"""The two test tiers: ``make check`` (``pytest --fast``) and ``make test`` (everything).

A test that starts a ``pteforge`` process, opens PostgreSQL or builds a model-zoo model
carries the marker of that resource (``server``, ``postgres``, ``zoo``); ``tests/conftest.py``
adds it by itself to users of the fixtures that start one, and ``--fast`` deselects every
marked test. The helpers that start those resources call :func:`need`: under ``--fast`` a test
that reached one without its marker fails, naming the marker, so it cannot slip into the
fast tier unnoticed. Outside pytest and in the full tier :func:`need` does nothing.
"""

from __future__ import annotations

import pytest

TIERED = ("server", "postgres", "zoo", "slow")
"""The markers ``--fast`` deselects (``slow``: larger models, only in ``make test``)."""

_current: pytest.Item | None = None
_armed = False


def arm(armed: bool) -> None:
    """Turn the guard on for a ``--fast`` run."""
    global _armed
    _armed = armed


def running(item: pytest.Item | None) -> None:
    """Record the test being set up or run (``None`` once it is done)."""
    global _current
    _current = item


def need(marker: str) -> None:
    """Fail the current fast-tier test unless it carries ``marker``."""
    if not _armed or _current is None:
        return
    if _current.get_closest_marker(marker) is None:
        pytest.fail(
            f"{_current.nodeid} uses a {marker} resource without @pytest.mark.{marker}: "
            f"mark it so that make check (pytest --fast) leaves it to make test",
            pytrace=False,
        )
