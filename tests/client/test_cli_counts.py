"""Counts the server would refuse are refused by the command line first, naming the range
(exit code 2, as for any bad local input), and nothing is sent (no server here)."""

from __future__ import annotations

import pytest

from pteforge.cli import build_parser


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["profile", "art_x", "forward", "-n", "0"], "--iterations/-n: 0 is not from 1 to 1000"),
        (["ls", "jobs", "--limit", "5000"], "--limit: 5000 is not from 1 to 1000"),
        (["ls", "jobs", "--limit", "many"], "--limit: invalid integer value: 'many'"),
        (["chat", "tiny", "--max-tokens", "0"], "--max-tokens: 0 is not at least 1"),
    ],
)
def test_a_count_out_of_range_is_refused_locally(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pteforge chat NAME --max-tokens 0`` went to the server for a 400, and
    ``profile -n 0`` answered the server's 'body.iterations: Input should be ...'."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2 and words in capsys.readouterr().err


def test_counts_in_range_parse_as_integers() -> None:
    args = build_parser().parse_args(["profile", "art_x", "forward", "-n", "1000"])
    assert args.iterations == 1000
    assert build_parser().parse_args(["chat", "tiny", "--max-tokens", "7"]).max_tokens == 7
