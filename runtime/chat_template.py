"""The Jinja2 environment a chat template renders in: the one ``transformers``'
``apply_chat_template`` gives templates, inside Jinja2's ``ImmutableSandboxedEnvironment``.

Templates are written against that environment, so it is matched here: ``trim_blocks`` and
``lstrip_blocks``; the ``loopcontrols`` extension (``{% break %}``, ``{% continue %}``); the
``{% generation %}`` block fine-tuned models' templates carry to mark assistant text for
training (rendered as its body, as vLLM does); ``raise_exception(message)``;
``strftime_now(format)`` (Llama 3.x templates write today's date with it); and a ``tojson``
that keeps non-ASCII text and ``<``, ``>``, ``&`` as they are, with ``indent``,
``separators`` and ``sort_keys``, instead of Jinja2's HTML-escaping one.

The sandbox stops unsafe calls, and the render's deadline stops Python code, but not one
long call into C: big-integer arithmetic is one (``7 ** 10**8`` held a worker for minutes,
until the pool's timeout replaced it, ending every session it held). So ``*``, ``**``,
``//`` and ``%`` (and ``divisibleby``, ``round``, which compute with them) refuse integers
past :data:`MAX_INT_BITS`, and powers whose result would be.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.filters import do_round
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from pteforge.runtime.errors import TokenizerError

MAX_INT_BITS = 1 << 16
"""Largest integer a template's arithmetic takes (about 20,000 digits): products, quotients
and powers of such numbers cost microseconds, far beyond it one C call can cost hours."""
MAX_ROUND_DIGITS = 400
"""Most digits ``round`` takes (a float has at most ~330 digits on either side of the point)."""


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


_OVER_BITS = f"an integer in the template's arithmetic is over {MAX_INT_BITS} bits"


def _check_ints(*values: Any) -> None:
    """Refuse an integer past :data:`MAX_INT_BITS`."""
    if any(isinstance(v, int) and v.bit_length() > MAX_INT_BITS for v in values):
        raise TokenizerError(_OVER_BITS)


def _power_bits(base: Any, exponent: Any) -> int:
    """At most how many bits ``base ** exponent`` has (0 but for integers, the exponent
    positive), known without computing it."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
        return exponent * base.bit_length()
    return 0


class _BoundedArithmetic(ImmutableSandboxedEnvironment):
    """The sandbox, with the arithmetic that runs in C held to :data:`MAX_INT_BITS`
    (intercepted operators are also not folded when the template is compiled)."""

    intercepted_binops = frozenset({"*", "**", "//", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_ints(left, right)
        if operator == "**" and _power_bits(left, right) >= MAX_INT_BITS:
            raise TokenizerError(_OVER_BITS)
        return super().call_binop(context, operator, left, right)


def divisibleby(value: Any, number: Any) -> bool:
    """Jinja2's ``divisibleby`` test, its integers bounded."""
    _check_ints(value, number)
    return bool(value % number == 0)


def bounded_round(value: Any, precision: Any = 0, method: str = "common") -> Any:
    """Jinja2's ``round`` filter, its precision bounded (``round(5, -10**8)`` computes
    ``10**10**8``)."""
    if isinstance(precision, int) and abs(precision) > MAX_ROUND_DIGITS:
        raise TokenizerError(f"round takes at most {MAX_ROUND_DIGITS} digits")
    return do_round(value, precision, method)  # type: ignore[arg-type]


def environment() -> ImmutableSandboxedEnvironment:
    """A sandboxed environment with what chat templates expect of ``transformers``'."""
    env = _BoundedArithmetic(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _GenerationBlock]
    )
    env.filters["tojson"] = tojson
    env.filters["round"] = bounded_round
    env.tests["divisibleby"] = divisibleby
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env
