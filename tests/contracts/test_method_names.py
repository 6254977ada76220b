"""The method-name rule: one statement of it, enforced alike by the CLI (and the server)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pteforge.contracts import METHOD_NAME_RULE, InvalidMethodNameError, check_method_name
from pteforge.contracts.names import InvalidProgramNameError, check_program_name

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["forward", "encode", "_x", "a" * 128, "decode_2"])
def test_good_names_pass(name: str) -> None:
    assert check_method_name(name) == name


@pytest.mark.parametrize("name", ["", "../x", "9a", "a" * 129, "a-b", "e\u0301", "a.b"])
def test_bad_names_state_the_rule(name: str) -> None:
    with pytest.raises(InvalidMethodNameError, match="ASCII letters, digits or underscores"):
        check_method_name(name)


def test_cli_refuses_a_path_as_method_name(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pteforge", "compile", "--method", "../x=enc.pt2", "-o",
         str(tmp_path / "x.pte")],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert METHOD_NAME_RULE in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("name", ["mlp v2", "éncodeur", "模型", "a" * 200])
def test_program_names_are_labels(name: str) -> None:
    assert check_program_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "a\nb", "a\x1b[2Jb", "a\x7fb", "a\x9b2Jb", "a\x85b", "mlp\u202etxt.exe", "a\u2066b"],
)
def test_program_names_hold_no_control_character(name: str) -> None:
    """C1 controls too (U+009B is CSI to a terminal): the rule says none, the check let
    them through; and bidirectional overrides, which make a listing show other text."""
    with pytest.raises(InvalidProgramNameError, match="none of them a control character"):
        check_program_name(name)
