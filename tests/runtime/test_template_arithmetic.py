"""Chat templates whose arithmetic would run in C for minutes (red-team pass): the render's
deadline interrupts Python code only, and Jinja2 folds constant expressions when it compiles
a template, so ``{% if 7 ** 100000000 %}`` held a runtime worker until the pool's timeout
replaced it (60 s; every session it held lost). Each is now refused at once, with a clear
error, and ordinary arithmetic renders as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pteforge.contracts.generation import ChatMessage
from pteforge.runtime.errors import TokenizerError
from pteforge.runtime.text_codec import TextCodec

BIG = '{% set x = (0).from_bytes(("\\xff" * 100000).encode(), "big") %}'
"""An integer of 1.6 million bits, built in linear time."""

HOSTILE = {
    "{% if 7 ** 100000000 > 0 %}x{% endif %}": "over 65536 bits",  # folded when compiled
    "{% set x = 7 ** 20000 %}{{ x * x * x * x > 0 }}": "over 65536 bits",
    BIG + "{{ x // (x - 12345) }}": "over 65536 bits",
    BIG + "{{ x % (x - 12345) }}": "over 65536 bits",
    BIG + "{{ x is divisibleby(x - 12345) }}": "over 65536 bits",
    "{{ 5 | round(-100000000) }}": "round takes at most 400 digits",
    "{{ 1 | round(100000000, 'ceil') }}": "round takes at most 400 digits",
}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models

    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    Tokenizer(models.WordLevel({"hi": 0, "<unk>": 1}, unk_token="<unk>")).save(str(path))
    return path


def _render(tokenizer: Path, directory: Path, template: str) -> str:
    config = directory / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": template}))
    return TextCodec(tokenizer, config).render((ChatMessage(role="user", content="hi"),))


@pytest.mark.parametrize("template", list(HOSTILE))
def test_arithmetic_on_huge_integers_is_refused(
    tokenizer: Path, tmp_path: Path, template: str
) -> None:
    with pytest.raises(TokenizerError, match=f"the chat template failed: .*{HOSTILE[template]}"):
        _render(tokenizer, tmp_path, template)


def test_ordinary_arithmetic_renders(tokenizer: Path, tmp_path: Path) -> None:
    template = (
        "{{ 2 ** 10 }} {{ 'ab' * 3 }} {{ 7 % 3 }} {{ '%s-%d' % ('a', 3) }} {{ 10 // 3 }} "
        "{{ 3.5 | round }} {{ 1234 | round(-2) }} {{ 10 is divisibleby 5 }} {{ 2 ** -1 }}"
    )
    assert _render(tokenizer, tmp_path, template) == "1024 ababab 1 a-3 3 4.0 1200 True 0.5"
