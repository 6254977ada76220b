"""The fast tier's guard (``tests/tiers.py``): under ``--fast`` a test that reaches a
server, PostgreSQL or the zoo without its marker fails, naming the marker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import tiers


def _armed_as(armed: bool) -> Iterator[None]:
    was = tiers._armed
    tiers.arm(armed)
    try:
        yield
    finally:
        tiers.arm(was)


@pytest.fixture
def armed() -> Iterator[None]:
    yield from _armed_as(True)


@pytest.fixture
def unarmed() -> Iterator[None]:
    yield from _armed_as(False)


@pytest.mark.usefixtures("armed")
def test_an_unmarked_test_fails_naming_the_marker() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"@pytest\.mark\.server"):
        tiers.need("server")


@pytest.mark.usefixtures("armed")
def test_a_marked_test_passes(request: pytest.FixtureRequest) -> None:
    request.node.add_marker("postgres")
    tiers.need("postgres")


@pytest.mark.usefixtures("unarmed")
def test_the_full_tier_never_fails() -> None:
    tiers.need("zoo")  # plain pytest: make test
