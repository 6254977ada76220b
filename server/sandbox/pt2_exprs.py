"""A derived dimension's expression in a pt2 archive (``srepr`` form), read without ``eval``.

torch writes a size that is an expression of symbols (a derived ``Dim``: ``384 * n - 256``
audio samples) as sympy's ``srepr`` (``Add(Mul(Integer(384), Symbol('s69', ...)),
Integer(-256))``) and keys its range in ``range_constraints`` by the printed form
(``384*s69 - 256``). The upload is untrusted, so the ``srepr`` (already checked by
:func:`~pteforge.server.sandbox.sym_grammar.check_sympy_expr`) is parsed here by a small
recursive reader over ``Integer``, ``Symbol``, ``Add`` and ``Mul`` alone, bounded in length
and depth, and rebuilt with sympy's constructors; anything else is no derived dimension.
"""

from __future__ import annotations

import re
from typing import Any

_MAX_CHARS = 1024
_MAX_DEPTH = 16
_TOKEN = re.compile(
    r"\s*(?:(?P<call>Add|Mul)\(|Integer\((?P<int>-?\d{1,18})\)"
    r"|Symbol\('(?P<sym>[A-Za-z_][A-Za-z0-9_]{0,63})'(?:, \w+=(?:True|False))*\)"
    r"|(?P<close>\))|(?P<comma>,))"
)


def derived_dimension(expr: Any, ranges: dict[str, Any]) -> str | None:
    """The ``range_constraints`` key of the expression ``expr`` (an ``srepr`` string), or
    None when it is not one this reader takes or the archive records no range for it."""
    if not isinstance(expr, str) or len(expr) > _MAX_CHARS:
        return None
    try:
        value, end = _read(expr, 0, 0)
    except ValueError:
        return None
    if expr[end:].strip():
        return None
    name = str(value)
    return name if name in ranges else None


def _read(text: str, at: int, depth: int) -> tuple[Any, int]:
    """The sympy value of the term at ``at``, and where it ends."""
    import sympy

    found = _TOKEN.match(text, at)
    if found is None or depth > _MAX_DEPTH:
        raise ValueError("not a derived dimension")
    if found["int"] is not None:
        return sympy.Integer(int(found["int"])), found.end()
    if found["sym"] is not None:
        return sympy.Symbol(found["sym"], integer=True, positive=True), found.end()
    if found["call"] is None:
        raise ValueError("not a derived dimension")
    args, at = _arguments(text, found.end(), depth + 1)
    return (sympy.Add if found["call"] == "Add" else sympy.Mul)(*args), at


def _arguments(text: str, at: int, depth: int) -> tuple[list[Any], int]:
    """The comma-separated terms from ``at`` to the closing parenthesis, and its end."""
    args: list[Any] = []
    while True:
        value, at = _read(text, at, depth)
        args.append(value)
        found = _TOKEN.match(text, at)
        if found is None or (found["close"] is None and found["comma"] is None):
            raise ValueError("not a derived dimension")
        at = found.end()
        if found["close"] is not None:
            return args, at
