"""Models exported once per session for the manager tests."""

from __future__ import annotations

import pytest

from pteforge.manager import ProgramManager, to_edge
from tests.models import MultiMethod, seq2seq_programs, shared_linear_programs


@pytest.fixture(scope="session")
def shared_linear() -> MultiMethod:
    return shared_linear_programs()


@pytest.fixture(scope="session")
def shared_edge(shared_linear: MultiMethod) -> ProgramManager:
    return to_edge(shared_linear.programs)


@pytest.fixture(scope="session")
def seq2seq() -> MultiMethod:
    return seq2seq_programs()
