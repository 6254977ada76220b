"""Reading dynamism and state from a ``.pte`` flatbuffer: a malformed program falls back
with a warning naming the file, anything else (a file that cannot be read) raises."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pteforge.runtime.kernel_guards import kernel_guards
from pteforge.runtime.metadata import ProgramFlatbuffer, read_dynamism
from pteforge.runtime.state import read_program_state
from tests.models import embedding_programs
from tests.runtime.helpers import compile_pte


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A compiled embedding, its first half, and bytes that are no program at all."""
    root = tmp_path_factory.mktemp("flatbuffers")
    whole = compile_pte(embedding_programs(), root / "whole.pte").path
    data = whole.read_bytes()
    (root / "half.pte").write_bytes(data[: len(data) // 2])
    (root / "noise.pte").write_bytes(bytes(range(256)) * 4)
    return {"whole": whole, "half": root / "half.pte", "noise": root / "noise.pte"}


def test_an_intact_program_is_read(programs: dict[str, Path]) -> None:
    assert read_dynamism(programs["whole"]) == {"forward": ([False], [False])}
    state = read_program_state(programs["whole"])
    assert state is not None and not state.stateful


def test_a_worker_reads_the_flatbuffer_once_for_all_three(
    programs: dict[str, Path], tmp_path: Path
) -> None:
    """A runtime worker loading a program reads state, dynamism and guarded methods from
    one read of its flatbuffer: gone after the first read, the file is not needed again."""
    copy = tmp_path / "copy.pte"
    copy.write_bytes(programs["whole"].read_bytes())
    flatbuffer = ProgramFlatbuffer(copy)
    state = read_program_state(flatbuffer)
    copy.unlink()
    assert read_dynamism(flatbuffer) == read_dynamism(programs["whole"])
    assert kernel_guards(flatbuffer).positions == frozenset()
    assert state == read_program_state(programs["whole"])


@pytest.mark.parametrize("name", ["half", "noise"])
@pytest.mark.parametrize("shared", [False, True])
def test_a_malformed_program_falls_back_with_a_warning(
    programs: dict[str, Path], name: str, shared: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Read from the path, or through one ``ProgramFlatbuffer`` as a worker does."""
    source = ProgramFlatbuffer(programs[name]) if shared else programs[name]
    with caplog.at_level(logging.WARNING, logger="pteforge.runtime"):
        assert read_dynamism(source) == {}
        assert read_program_state(source) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all(str(programs[name]) in w for w in warnings), warnings
    assert "static shapes" in warnings[0] and "keep state" in warnings[1]


def test_the_header_size_is_checked_against_the_file(
    programs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pteforge.runtime"):
        read_dynamism(programs["half"])
    assert "the file has" in caplog.text  # refused before reading a size the file lacks


def test_a_file_that_cannot_be_read_raises(tmp_path: Path) -> None:
    missing = tmp_path / "gone.pte"
    with pytest.raises(FileNotFoundError, match=r"gone\.pte"):
        read_dynamism(missing)
    with pytest.raises(FileNotFoundError, match=r"gone\.pte"):
        read_program_state(missing)
