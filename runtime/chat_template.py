"""The Jinja2 environment a chat template renders in: the one ``transformers``'
``apply_chat_template`` gives templates, inside Jinja2's ``ImmutableSandboxedEnvironment``.

Templates are written against that environment, so it is matched here: ``trim_blocks`` and
``lstrip_blocks``; the ``loopcontrols`` extension (``{% break %}``, ``{% continue %}``); the
``{% generation %}`` block fine-tuned models' templates carry to mark assistant text for
training (rendered as its body, as vLLM does); ``raise_exception(message)``;
``strftime_now(format)`` (Llama 3.x templates write today's date with it); and a ``tojson``
that keeps non-ASCII text and ``<``, ``>``, ``&`` as they are, with ``indent``,
``separators`` and ``sort_keys``, instead of Jinja2's HTML-escaping one.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from pteforge.runtime.errors import TokenizerError


class _GenerationBlock(Extension):
    """``{% generation %}...{% endgeneration %}``: its body, unchanged."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def raise_exception(message: str) -> None:
    """A template's own refusal (a system message it does not take, roles out of turn)."""
    raise TokenizerError(str(message))


def tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """JSON of ``value`` as ``transformers`` writes it in a template (no HTML escaping)."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def strftime_now(format: str) -> str:
    """The local time now in ``format`` (``strftime``)."""
    return datetime.now().strftime(format)


def environment() -> ImmutableSandboxedEnvironment:
    """A sandboxed environment with what chat templates expect of ``transformers``'."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _GenerationBlock]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env
