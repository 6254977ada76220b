"""Models exported once for the manager tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pteforge.manager import ProgramManager, to_edge
from tests.models import (
    MultiMethod,
    hf_encoder_decoder_programs,
    seq2seq_programs,
    shared_linear_programs,
)


def _exported_once(build: Callable[[], MultiMethod], name: str) -> Any:
    """The session fixture ``name``: the model ``build`` exports, exported once."""
    return pytest.fixture(scope="session", name=name)(lambda: build())


shared_linear = _exported_once(shared_linear_programs, "shared_linear")
seq2seq = _exported_once(seq2seq_programs, "seq2seq")
hf_model = _exported_once(hf_encoder_decoder_programs, "hf_model")


@pytest.fixture(scope="session")
def shared_edge(shared_linear: MultiMethod) -> ProgramManager:
    return to_edge(shared_linear.programs)
