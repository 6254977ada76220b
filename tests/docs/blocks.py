"""The shell blocks of the README and docs/*.md, and the commands, make targets and curl
paths they name.

A fenced block whose language is ``bash`` or ``sh`` is a shell block; one right after a
``<!-- illustrative -->`` line (output, or a sketch that is not meant to run) is skipped. The
README's quickstart is the block right after ``<!-- quickstart -->``, its command-line
form the one after ``<!-- quickstart-cli -->``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
SKIP_MARKER = "<!-- illustrative -->"
QUICKSTART_MARKER = "<!-- quickstart -->"
CLI_MARKER = "<!-- quickstart-cli -->"
_FENCE = re.compile(r"^(?P<marker>[^\n]*\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$", re.M | re.S)
_HTTP_PATH = re.compile(r"(/(?:v1|v2|metrics|docs|redoc|openapi\.json)\b[^?#\s'\"]*)")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, the line above it and its text."""

    path: Path
    line: int
    lang: str
    marker: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """The README and every page under docs/."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order."""
    text = path.read_text()
    found = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start("lang")) + 1
        marker = (match.group("marker") or "").strip()
        found.append(Block(path, line, match.group("lang"), marker, match.group("body")))
    return found


def shell_blocks() -> list[Block]:
    """The shell blocks of every document that are meant to run."""
    return [
        block
        for path in documents()
        for block in blocks(path)
        if block.lang in SHELL_LANGUAGES and block.marker != SKIP_MARKER
    ]


def quickstart(marker: str = QUICKSTART_MARKER) -> str:
    """The README's bash block right after ``marker``, as printed."""
    marked = [block for block in blocks(README) if block.marker == marker]
    assert len(marked) == 1, f"README.md needs exactly one block after {marker}"
    assert marked[0].lang == "bash", f"the block after {marker} is a bash block"
    return marked[0].body


def commands(block: Block) -> list[list[str]]:
    """The block's simple commands as words (continuation lines joined, comments dropped);
    a pipeline, list or ``$(...)`` splits into its commands."""
    text = block.body.replace("\\\n", " ")
    found: list[list[str]] = []
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for word in lexer:
            if word and set(word) <= set(";&|()"):
                found.append(words)
                words = []
            else:
                words.append(word)
        found.append(words)
    return [words for words in found if words]


def program(word: str) -> str:
    """The command a word runs: ``.venv/bin/pteforge`` runs ``pteforge``; an assignment's
    value, ``X=$(pteforge ...`` is split off by :func:`commands` already."""
    return word.rsplit("/", 1)[-1]


def http_paths(words: list[str]) -> list[str]:
    """The service paths in a curl command's words (``$URL/v1/jobs/$JOB`` gives
    ``/v1/jobs/$JOB``)."""
    return [m.group(1) for word in words if (m := _HTTP_PATH.search(word))]
