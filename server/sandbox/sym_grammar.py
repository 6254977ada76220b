"""Safe grammars for the expression strings a pt2 archive carries.

torch's deserializer hands ``expr_str`` to ``sympy.sympify`` (which ends in ``eval``) and
``ep.module()`` ``exec``s ``guards_code``.  Both are checked here with small tokenizers and a
recursive-descent parser; nothing is ever evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import UnsafeArchiveError

_SREPR_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(-?\d+)|('[^'\\]*')|([(),=]))")
_SYMBOL_NAME = re.compile(r"^[a-z]{1,8}\d{1,9}$")
_FLOAT_TEXT = re.compile(r"^-?\d+(\.\d+)?(e-?\d+)?$")
_MAX_INT_DIGITS = 30
_MAX_POW_EXPONENT = 64
_MAX_DEPTH = 64

_FUNCTIONS = frozenset(
    [
        "Integer",
        "Float",
        "Rational",
        "Add",
        "Mul",
        "Pow",
        "Max",
        "Min",
        "FloorDiv",
        "CleanDiv",
        "Mod",
        "PythonMod",
        "ModularIndexing",
        "CeilToInt",
        "FloorToInt",
        "TruncToInt",
        "IntTrueDiv",
        "FloatTrueDiv",
        "ToFloat",
        "Where",
        "Eq",
        "Ne",
        "Lt",
        "Le",
        "Gt",
        "Ge",
        "Equality",
        "Unequality",
        "StrictLessThan",
        "LessThan",
        "StrictGreaterThan",
        "GreaterThan",
        "And",
        "Or",
        "Not",
        "Abs",
        "Infinity",
        "NegativeInfinity",
        "IntInfinity",
        "NegativeIntInfinity",
    ]
)
_CONSTANTS = frozenset({"true", "false", "True", "False", "oo", "zoo"})
_SYMBOL_KEYWORDS = frozenset({"positive", "integer", "nonnegative", "real", "finite"})


@dataclass
class _Tok:
    kind: str  # "name" | "int" | "str" | "call" | "kw" | punctuation itself
    text: str
    value: str = ""  # for a call of Integer: its literal


def _tokenize_srepr(text: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if text[pos:].isspace():
            break
        m = _SREPR_TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"unexpected character {text[pos]!r} at {pos}")
        name, num, string, punct = m.groups()
        if name:
            tokens.append(_Tok("name", name))
        elif num:
            tokens.append(_Tok("int", num))
        elif string:
            tokens.append(_Tok("str", string[1:-1]))
        else:
            tokens.append(_Tok(punct, punct))
        pos = m.end()
    return tokens


class _SreprParser:
    """expr := INT | CONST | NAME '(' [arg (',' arg)*] ')'; arg := NAME '=' CONST | expr | STR."""

    def __init__(self, tokens: list[_Tok]) -> None:
        self.tokens = tokens
        self.pos = 0

    def _peek(self, offset: int = 0) -> _Tok | None:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def _take(self, kind: str) -> _Tok:
        tok = self._peek()
        if tok is None or tok.kind != kind:
            raise ValueError(f"expected {kind!r}, got {tok.text if tok else 'end'!r}")
        self.pos += 1
        return tok

    def parse(self) -> None:
        self._expr(0)
        if self._peek() is not None:
            raise ValueError("trailing tokens")

    def _expr(self, depth: int) -> _Tok:
        if depth > _MAX_DEPTH:
            raise ValueError("expression nests too deeply")
        tok = self._peek()
        if tok is not None and tok.kind == "int":
            self.pos += 1
            _check_int(tok.text)
            return tok
        name = self._take("name")
        if self._peek() is None or self._peek().kind != "(":  # type: ignore[union-attr]
            if name.text not in _CONSTANTS:
                raise ValueError(f"name {name.text!r} is not allowed")
            return name
        return self._call(name.text, depth)

    def _call(self, func: str, depth: int) -> _Tok:
        self._take("(")
        args: list[_Tok] = []
        while self._peek() is not None and self._peek().kind != ")":  # type: ignore[union-attr]
            if args:
                self._take(",")
            args.append(self._arg(func, depth))
        self._take(")")
        _check_call(func, args)
        return _Tok("call", func, args[0].text if func == "Integer" else "")

    def _arg(self, func: str, depth: int) -> _Tok:
        tok, nxt = self._peek(), self._peek(1)
        if tok is not None and tok.kind == "name" and nxt is not None and nxt.kind == "=":
            if func not in ("Symbol", "Float"):
                raise ValueError(f"{func} takes no keyword arguments")
            self.pos += 2
            value = self._take("name" if func == "Symbol" else "int")
            if func == "Symbol" and (
                tok.text not in _SYMBOL_KEYWORDS or value.text not in _CONSTANTS
            ):
                raise ValueError(f"keyword {tok.text}={value.text} is not allowed")
            if func == "Float" and tok.text != "precision":
                raise ValueError(f"keyword {tok.text} is not allowed")
            return _Tok("kw", tok.text)
        if tok is not None and tok.kind == "str":
            self.pos += 1
            return tok
        return self._expr(depth + 1)


def _check_int(text: str) -> None:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise ValueError("integer literal is too long")


def _check_call(func: str, args: list[_Tok]) -> None:
    strings = [a for a in args if a.kind == "str"]
    if func == "Symbol":
        if len(strings) != 1 or args[0].kind != "str" or not _SYMBOL_NAME.match(args[0].text):
            raise ValueError("Symbol needs one plain symbol name such as 's0'")
        return
    if func not in _FUNCTIONS:
        raise ValueError(f"function {func!r} is not allowed")
    if func == "Float":
        if len(strings) != 1 or not _FLOAT_TEXT.match(strings[0].text):
            raise ValueError("Float needs one numeric string")
    elif strings:
        raise ValueError(f"{func} takes no string arguments")
    if func == "Integer" and (len(args) != 1 or args[0].kind != "int"):
        raise ValueError("Integer takes one integer literal")
    if func == "Pow":
        _check_pow(args)


def _check_pow(args: list[_Tok]) -> None:
    """A huge literal exponent would make sympy build an enormous number."""
    exponent = args[1] if len(args) == 2 else None
    literal = exponent.text if exponent and exponent.kind == "int" else None
    if exponent and exponent.kind == "call" and exponent.text == "Integer":
        literal = exponent.value
    if literal is None or abs(int(literal)) > _MAX_POW_EXPONENT:
        raise ValueError(f"Pow exponent must be an integer literal up to {_MAX_POW_EXPONENT}")


def check_sympy_expr(expr: str, entry: str, max_chars: int) -> None:
    """Accept only a sympy ``srepr`` string built from symbols, integers and arithmetic."""
    if len(expr) > max_chars:
        raise UnsafeArchiveError(
            "unsafe_expression", f"expression longer than {max_chars} chars", entry
        )
    try:
        _SreprParser(_tokenize_srepr(expr)).parse()
    except ValueError as e:
        raise UnsafeArchiveError(
            "unsafe_expression", f"expr_str {expr[:80]!r} rejected: {e}", entry
        ) from e


_GUARD_ACCESSOR = re.compile(
    r"L(?:\[(?:'[A-Za-z_][A-Za-z0-9_]*'|\d+)\])+"
    r"(?:\.size\(\)\[\d+\]|\.stride\(\)\[\d+\]|\.storage_offset\(\))?"
)
_GUARD_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(\d+)|(//|<=|>=|==|!=|[-+*/%<>(),]))")
_GUARD_NAMES = frozenset({"and", "or", "not", "True", "False", "_v", "max", "min", "Max", "Min"})


def check_guard_code(code: str, entry: str, max_chars: int) -> None:
    """Accept only shape guards such as ``(L['x'].size()[0] // 2) != 1``."""
    if len(code) > max_chars or "\n" in code or "\r" in code or "**" in code:
        raise UnsafeArchiveError(
            "unsafe_guard_code", f"guard {code[:80]!r} is not a shape guard", entry
        )
    rest = _GUARD_ACCESSOR.sub(" _v ", code)
    pos = 0
    while pos < len(rest):
        if rest[pos:].isspace():
            break
        m = _GUARD_TOKEN.match(rest, pos)
        if m is None or (m.group(1) and m.group(1) not in _GUARD_NAMES):
            raise UnsafeArchiveError(
                "unsafe_guard_code", f"guard {code[:80]!r} is not a shape guard", entry
            )
        if m.group(2):
            _check_guard_int(m.group(2), code, entry)
        pos = m.end()


def _check_guard_int(text: str, code: str, entry: str) -> None:
    if len(text) > _MAX_INT_DIGITS:
        raise UnsafeArchiveError(
            "unsafe_guard_code", f"guard {code[:80]!r}: integer too long", entry
        )
