"""The expression and guard grammars accept what torch writes and nothing executable."""

from __future__ import annotations

import pytest

from pteforge.server.sandbox import UnsafeArchiveError
from pteforge.server.sandbox.sym_grammar import check_guard_code, check_sympy_expr

GOOD_EXPRS = [
    "Symbol('s39', positive=True, integer=True)",
    "Mul(Integer(2), Symbol('s39', positive=True, integer=True))",
    "Add(Symbol('s17', integer=True), Mul(Integer(-1), Symbol('u0', integer=True)))",
    "FloorDiv(Symbol('s0', integer=True), Integer(2))",
    "Max(Integer(1), Symbol('s0', integer=True))",
    "Eq(Mod(Symbol('s0', integer=True), Integer(2)), Integer(0))",
    "Pow(Symbol('s0', integer=True), Integer(2))",
    "Float('1.5', precision=53)",
    "true",
    "7",
]
BAD_EXPRS = [
    "__import__('os').system('id')",
    "Symbol('s0').__class__",
    "Symbol('__import__')",
    "Lambda(Symbol('s0'), Symbol('s0'))",
    "Function('f')(Symbol('s0'))",
    "Pow(Integer(10), Integer(100000000))",
    "Integer(" + "9" * 100 + ")",
    "Add(" * 100 + "1" + ")" * 100,
    "Symbol('s0', evaluate=True)",
    "S('x')",
    "Add(Integer(1), Integer(2), evaluate=0)",
    "Add(1, 2",
    "eval",
]


GOOD_GUARDS = [
    "(L['x'].size()[0] // 2) <= L['x'].size()[0]",
    "(L['x'].size()[0] // 2) != 1",
    "L['x'].size()[0] == 2*L['y'].size()[1] and not L['args'][0].stride()[0] > 3",
    "max(1, L['x'].size()[0]) % 4 == 0",
]
BAD_GUARDS = [
    "__import__('os').system('id') == 0",
    "L['x'].size()[0] == 1\nimport os",
    "L['x'].__class__ == 1",
    "L['x'].size()[0] ** 999999999 == 1",
    "open('/etc/passwd') == 1",
    'L["x"].size()[0] == 1',
    "(lambda: 1)() == 1",
]

# kind of text -> (its checker, the reason it gives for a rejected text)
CHECKERS = {
    "sympy": (check_sympy_expr, "unsafe_expression"),
    "guard": (check_guard_code, "unsafe_guard_code"),
}


def _cases(sympy: list[str], guards: list[str]) -> list[tuple[str, str]]:
    return [("sympy", text) for text in sympy] + [("guard", text) for text in guards]


@pytest.mark.parametrize(("kind", "text"), _cases(GOOD_EXPRS, GOOD_GUARDS))
def test_what_torch_writes_is_accepted(kind: str, text: str) -> None:
    check, _ = CHECKERS[kind]
    check(text, "m.json", 2000)


@pytest.mark.parametrize(("kind", "text"), _cases(BAD_EXPRS, BAD_GUARDS))
def test_payloads_are_rejected(kind: str, text: str) -> None:
    check, reason = CHECKERS[kind]
    with pytest.raises(UnsafeArchiveError) as info:
        check(text, "m.json", 2000)
    assert info.value.reason == reason
