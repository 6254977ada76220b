"""The README reads in five minutes: at most 150 lines, opening with the two commands that set
up a fresh machine, and a way to every page of docs/."""

from __future__ import annotations

from tests.docs.blocks import README, ROOT, blocks, commands


def test_the_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 150


def test_the_readme_opens_with_make_serve_and_make_test() -> None:
    first = blocks(README)[0]
    assert [words[:2] for words in commands(first)] == [["make", "serve"], ["make", "test"]]
    assert README.read_text().index("```") < README.read_text().index("\n## ")


def test_the_readme_links_every_page_of_docs() -> None:
    text = README.read_text()
    pages = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md"))
    assert [page for page in pages if f"]({page})" not in text] == []
