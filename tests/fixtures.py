"""Fixtures several suites share. A suite's ``conftest.py`` imports them by name; each then
takes that suite's own fixtures (``seq2seq``: the model that suite uploads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.models import MultiMethod, save_programs


@pytest.fixture(scope="package")
def seq2seq_files(
    seq2seq: MultiMethod, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Each method of ``seq2seq`` saved with ``torch.export.save``, as a client would upload
    it."""
    return save_programs(seq2seq.programs, tmp_path_factory.mktemp("seq2seq"))
