"""The grammars of the strings of an uploaded program that are not free text: names,
qualified names, literals and pytree specs (:mod:`.pt2_schema` says which field has which).

A pytree spec (``ModuleCallSignature.in_spec`` / ``out_spec``) is JSON, ``[1, node]`` with
each node ``{"type", "context", "children_spec"}``. torch looks a type up in a registry (a
dotted name); a context is JSON (a namedtuple's is its registered name), decoded with a hook
that *imports the module* an ``{"__enum__": ...}`` object names. ``ep.module()`` then writes
the keys of the root's kwargs dictionary into ``def forward(...)`` when
``forward_arg_names`` is absent, and every other key, ``repr()``'d, into a double-quoted
guard message it ``exec``'s. So: no enums, kwargs names are identifiers, and every other
string of a context is a literal.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Callable
from typing import Any

MAX_NAME_CHARS = 1024
DEVICE_TYPES = frozenset({"cpu", "meta", "cuda", "mps", "xpu", "mtia", "hpu"})
Check = Callable[[str], str]  # a string -> what is wrong with it ("" if nothing)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DOTTED = re.compile(r"(?:[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)?\Z")  # layers.0.weight
_LITERAL = re.compile(r"[^'\"\\\x00-\x1f\x7f]{0,4096}\Z")
_NODE_KEYS = frozenset({"type", "context", "children_spec"})
PRIMITIVES: dict[str, type | tuple[type, ...]] = {"int": int, "float": (int, float), "bool": bool}
_INT64 = range(-(1 << 63), 1 << 63)
NON_FINITE_FLOATS = frozenset({"Infinity", "-Infinity", "NaN"})
"""How torch's serializer writes a non-finite float (JSON has none): ``masked_fill`` with
``-inf``, as attention with a padding mask exports, has ``"as_float": "-Infinity"``."""


def primitive(type_name: str, value: Any) -> str:
    """What is wrong with ``value`` as a schema ``int``, ``float`` or ``bool`` ("" if nothing).
    A float may be one of :data:`NON_FINITE_FLOATS`, as torch writes them.
    torch's ints are C++ ``int64_t`` (sizes, strides, a dynamic dimension's range), and it
    never writes a larger one: a range bound past 64 bits failed the compile child's memory
    planning as an internal error, so it is refused here, at the upload."""
    if type_name == "float" and isinstance(value, str) and value in NON_FINITE_FLOATS:
        return ""
    wanted = PRIMITIVES[type_name]
    if not isinstance(value, wanted) or (type(value) is bool and type_name != "bool"):
        return f"expected {type_name}"
    if type(value) is int and value not in _INT64:
        return f"{str(value)[:24]}... does not fit in 64 bits"
    return ""


def identifier(value: str) -> str:
    """A Python identifier that is not a keyword (names that become code)."""
    if len(value) > MAX_NAME_CHARS or not _IDENTIFIER.match(value):
        return "names must be Python identifiers"
    return "a Python keyword" if keyword.iskeyword(value) else ""


def argument_name(value: str) -> str:
    """An operator argument's name: an identifier, a keyword (``from``) or empty."""
    return "" if value == "" or (len(value) < 256 and _IDENTIFIER.match(value)) else "not a name"


def dotted_name(value: str) -> str:
    """Words of letters, digits and ``_`` joined by dots, or empty (``layers.0.weight``)."""
    if len(value) <= MAX_NAME_CHARS and _DOTTED.match(value):
        return ""
    return "qualified names are words of letters, digits and _ joined by dots"


def device_type(value: str) -> str:
    """``Device.type``: one of :data:`DEVICE_TYPES`."""
    return "" if value in DEVICE_TYPES else f"one of {sorted(DEVICE_TYPES)}"


def literal(value: str) -> str:
    """Text torch puts between quotes unescaped: no quote, backslash or control character."""
    return "" if _LITERAL.match(value) else "no quotes, backslashes or control characters"


def treespec(value: str) -> str:
    """What is wrong with the pytree spec ``value`` ("" if nothing)."""
    try:
        version, root = json.loads(value)
    except (ValueError, TypeError, RecursionError):
        return "not a pytree spec"
    if version != 1:
        return "only pytree protocol 1 is accepted"
    kwargs = _kwargs_node(root)
    stack = [root]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or set(node) != _NODE_KEYS:
            return "not a pytree spec node"
        if not isinstance(node["children_spec"], list):
            return "children_spec is not a list"
        problem = _node_problem(node, identifier if node is kwargs else literal)
        if problem:
            return problem
        stack.extend(node["children_spec"])
    return ""


def _kwargs_node(root: Any) -> Any:
    """The kwargs dictionary of an ``(args, kwargs)`` root, as ``ep.module()`` tells them."""
    children = root.get("children_spec") if isinstance(root, dict) else None
    if root.get("type") != "builtins.tuple" or not isinstance(children, list) or len(children) != 2:
        return None
    args, kwargs = children
    types = [c.get("type") if isinstance(c, dict) else None for c in children]
    return kwargs if types == ["builtins.tuple", "builtins.dict"] and args else None


def _node_problem(node: dict[str, Any], strings: Check) -> str:
    kind, context = node["type"], node["context"]
    if kind is not None and (not isinstance(kind, str) or dotted_name(kind)):
        return f"pytree type {str(kind)[:80]!r} is not a dotted name"
    if context is None or kind is None:
        return "" if context is None else "a leaf has no context"
    if not isinstance(context, str):
        return "a pytree context is a string"
    if kind == "collections.namedtuple":
        return f"namedtuple {context[:80]!r}: {why}" if (why := dotted_name(context)) else ""
    try:
        decoded = json.loads(context)
    except (ValueError, RecursionError):
        return "a pytree context is JSON"
    return _context_problem(decoded, strings)


def _context_problem(context: Any, strings: Check) -> str:
    """Every string of a decoded context (keys too) passes ``strings``; no enum object."""
    stack = [context]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "__enum__" in item:
                return "enum contexts are not accepted (torch would import their module)"
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and (problem := strings(item)):
            return f"pytree key {item[:80]!r}: {problem}"
    return ""
