"""Every command the README and docs/*.md show in a shell block exists: each ``pteforge``
subcommand in the CLI's parser, each ``make`` target in the Makefile, each ``curl`` path among
the app's routes; and every relative link of those pages reaches a file."""

from __future__ import annotations

import argparse
import re
from functools import cache
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import Match

from pteforge.cli import build_parser
from tests.docs.blocks import ROOT, Block, commands, documents, http_paths, program, shell_blocks

_MAKE_TARGET = re.compile(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", re.M)
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@cache
def _cli() -> argparse.ArgumentParser:
    return build_parser()


@cache
def _make_targets() -> frozenset[str]:
    return frozenset(_MAKE_TARGET.findall((ROOT / "Makefile").read_text()))


@cache
def _app() -> Starlette:
    from pteforge.server.app import create_app
    from pteforge.server.settings import Settings

    return create_app(Settings())  # routes only: nothing starts without the lifespan


def _served(path: str) -> bool:
    """Whether a route of the app answers ``path`` (with any method)."""
    scope = {"type": "http", "path": path, "method": "GET", "root_path": "", "headers": []}
    return any(route.matches(scope)[0] is not Match.NONE for route in _app().routes)


def _check_pteforge(words: list[str], where: str) -> None:
    parser = _cli()
    for word in words:
        if word.startswith("-") or "=" in word:
            break
        choices = _subcommands(parser)
        if not choices:
            return
        assert word in choices, (
            f"{where}: `pteforge ... {word}` is no subcommand ({sorted(choices)})"
        )
        parser = choices[word]


def _runs(words: list[str], i: int) -> bool:
    """Whether ``words[i]`` is in command position: first, or what ``docker compose exec
    SERVICE`` (or ``run``) runs."""
    return i == 0 or (i >= 2 and words[i - 2] in {"exec", "run"})


def _check(block: Block) -> int:
    """Check the block's commands; return how many it named."""
    checked = 0
    for words in commands(block):
        for i, word in enumerate(words):
            if program(word) == "pteforge" and _runs(words, i):
                _check_pteforge(words[i + 1 :], block.where)
                checked += 1
        if words[0] == "make":
            targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
            missing = set(targets) - _make_targets()
            assert not missing, f"{block.where}: no make target {sorted(missing)}"
            checked += 1
        if program(words[0]) == "curl":
            for path in http_paths(words):
                assert _served(path), f"{block.where}: curl calls {path}, which no route serves"
                checked += 1
    return checked


@pytest.mark.parametrize("block", shell_blocks(), ids=lambda block: block.where)
def test_every_command_of_a_shell_block_exists(block: Block) -> None:
    _check(block)


def test_a_missing_route_is_noticed() -> None:
    assert _served("/v1/jobs/JOB/events") and not _served("/v1/no-such-route")


def test_the_checks_see_every_kind_of_command() -> None:
    kinds = {program(words[0]) for block in shell_blocks() for words in commands(block)}
    assert {"make", "pteforge", "curl"} <= kinds
    assert sum(_check(block) for block in shell_blocks()) >= 20


@pytest.mark.parametrize("page", documents(), ids=lambda path: path.name)
def test_relative_links_reach_a_file(page: Path) -> None:
    for target in _LINK.findall(page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
