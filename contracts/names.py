"""The method-name rule: what a program's method may be called; the model-name and
program-name rules.

A method name becomes a multipart field name, a file name inside stored bundles and archives,
and the second half of a ``/v2`` model name (``{artifact_id}.{method}``), so it is kept to a
plain identifier everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

METHOD_NAME_MAX_CHARS = 128
METHOD_NAME_PATTERN = rf"[A-Za-z_][A-Za-z0-9_]{{0,{METHOD_NAME_MAX_CHARS - 1}}}"
METHOD_NAME_RULE = (
    f"a method name is 1 to {METHOD_NAME_MAX_CHARS} ASCII letters, digits or underscores, "
    "not starting with a digit"
)
_METHOD_NAME = re.compile(METHOD_NAME_PATTERN)


class InvalidMethodNameError(ValueError):
    """A method name breaks :data:`METHOD_NAME_RULE`."""


def check_method_name(name: str) -> str:
    """``name`` if it follows the method-name rule; raises ``InvalidMethodNameError`` naming it."""
    return _follows(name, "method name", _METHOD_NAME, METHOD_NAME_RULE, InvalidMethodNameError)


MODEL_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
MODEL_NAME_RULE = (
    f"a model name matches {MODEL_NAME_PATTERN}: 1 to 64 ASCII letters, digits, "
    "underscores or hyphens, starting with a letter or digit (no dot: a dot separates the method)"
)
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)


class InvalidModelNameError(ValueError):
    """A model name breaks :data:`MODEL_NAME_RULE`."""


def check_model_name(name: str) -> str:
    """``name`` if it follows the model-name rule; raises ``InvalidModelNameError`` naming it."""
    return _follows(name, "model name", _MODEL_NAME, MODEL_NAME_RULE, InvalidModelNameError)


PROGRAM_NAME_MAX_CHARS = 200
PROGRAM_NAME_RULE = (
    f"a program name is 1 to {PROGRAM_NAME_MAX_CHARS} characters, none of them a control "
    "character or a bidirectional override"
)
# C0, DEL and C1 (U+0080-U+009F: U+009B is a terminal's CSI, as ESC [ is), and the
# bidirectional marks, embeddings, overrides and isolates, which make a listing show a name
# other than its text ("Trojan Source")
_PROGRAM_NAME = re.compile(
    rf"[^\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]{{1,{PROGRAM_NAME_MAX_CHARS}}}"
)


class InvalidProgramNameError(ValueError):
    """A program name breaks :data:`PROGRAM_NAME_RULE`."""


def check_program_name(name: str) -> str:
    """``name`` if it follows the program-name rule (a label, shown in listings: any text of
    sane length); raises ``InvalidProgramNameError`` naming it."""
    return _follows(name, "program name", _PROGRAM_NAME, PROGRAM_NAME_RULE, InvalidProgramNameError)


def _follows(
    name: str, what: str, pattern: re.Pattern[str], rule: str, error: type[ValueError]
) -> str:
    """``name`` if ``pattern`` matches all of it; else raises ``error`` with the name (its
    first 40 characters for a longer one) and the ``rule`` it breaks."""
    if pattern.fullmatch(name) is None:
        shown = name if len(name) <= 40 else f"{name[:40]}... ({len(name)} characters)"
        raise error(f"invalid {what} {shown!r}: {rule}")
    return name


def parse_method_files(specs: Iterable[str]) -> dict[str, Path]:
    """``METHOD=FILE`` arguments as ``{method: Path(FILE)}``, in order (the command lines'
    way to name a program's methods). Raises a ``ValueError`` naming the argument that lacks
    a side or repeats a method, ``InvalidMethodNameError`` for a method the rule refuses."""
    files: dict[str, Path] = {}
    for spec in specs:
        method, sep, file = spec.partition("=")
        if not sep or not method or not file:
            raise ValueError(f"{spec!r}: expected METHOD=FILE.pt2")
        if method in files:
            raise ValueError(f"{spec!r}: method {method!r} given twice")
        try:
            check_method_name(method)
        except InvalidMethodNameError as exc:
            raise InvalidMethodNameError(f"{spec!r}: {exc}") from None
        files[method] = Path(file)
    return files
