"""Every string of an uploaded program document, checked by what torch's schema says it is.

torch's deserialiser and FX's code generation put serialized *names* into generated Python
source: a placeholder's name becomes a parameter of ``def forward(self, ...)`` (a default
value there runs when the module is built), a node's name an assignment target,
``forward_arg_names`` the whole parameter list. ``expr_str`` goes to ``sympy.sympify`` (an
``eval``) and guard code to ``exec``. So no string of a ``models/*.json`` document is taken
on trust: the document is walked by the types of ``torch._export.serde.schema`` (read from
the ``schema.yaml`` torch ships, without importing torch), and each string field has a class
(:data:`FIELD_CLASSES`, :data:`KEY_CLASSES`) that says what it may hold. A field the schema
has and the table lacks is refused, so a field added by a future torch is refused (and
fails ``tests/sandbox/test_schema_fields.py``) until someone classifies it.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from . import operators
from . import pt2_grammars as grammars
from .errors import UnsafeArchiveError
from .sym_grammar import check_guard_code, check_sympy_expr

ROOT = "ExportedProgram"
MAX_NAME_CHARS = grammars.MAX_NAME_CHARS
MAX_TEXT_CHARS = 1 << 20
MAX_EXPRESSION_CHARS = 2_000  # as ArchiveLimits.max_expression_chars


class Kind(StrEnum):
    """What a string field may hold."""

    IDENTIFIER = "identifier"  # a Python identifier, not a keyword: names that become code
    ARGUMENT_NAME = "argument name"  # an identifier, a keyword (``from``) or empty (positional)
    DOTTED_NAME = "dotted name"  # words of [A-Za-z0-9_] joined by dots, or empty: FQNs
    OPERATOR = "operator"  # a callable the graph runs: the operator allowlist decides
    DEVICE = "device type"  # one of :data:`.pt2_grammars.DEVICE_TYPES`
    SYMPY = "symbolic expression"  # the sympy grammar of :mod:`.sym_grammar`
    GUARD = "guard"  # the guard grammar of :mod:`.sym_grammar` (ep.module() exec's it)
    LITERAL = "string literal"  # text torch puts between quotes unescaped: no ' " \\ or line break
    TREESPEC = "pytree spec"  # pytree JSON: its types and context strings (.pt2_grammars)
    FREE_TEXT = "free text"  # never reaches code generation, eval or an import: bounded
    REFUSED = "refused"  # never accepted (custom objects)


_I, _A, _D, _T = Kind.IDENTIFIER, Kind.ARGUMENT_NAME, Kind.DOTTED_NAME, Kind.FREE_TEXT
FIELD_CLASSES: dict[tuple[str, str], Kind] = {
    # Operator arguments are repr()'d (an assert's message quotes a node's name). A constant
    # input's value (a graph input's as_string, its ConstantValue) becomes the guard
    # f"{src} == '{value}'" that ep.module() exec's: a LITERAL, see _check_graph_inputs.
    ("Argument", "as_string"): _T,
    ("Argument", "as_strings"): _T,
    ("Argument", "as_operator"): Kind.OPERATOR,
    ("BufferMutationSpec", "buffer_name"): _D,
    ("ConstantValue", "as_string"): Kind.LITERAL,
    ("CustomObjArgument", "name"): Kind.REFUSED,
    ("CustomObjArgument", "class_fqn"): Kind.REFUSED,
    ("Device", "type"): Kind.DEVICE,
    ("ExportedProgram", "verifiers"): _I,  # dialect names, looked up in a registry
    ("ExportedProgram", "torch_version"): _T,  # compared, never run
    ("ExportedProgram", "guards_code"): Kind.GUARD,
    ("GradientToParameterSpec", "parameter_name"): _D,
    ("GradientToUserInputSpec", "user_input_name"): _I,
    ("GraphArgument", "name"): _I,
    ("InputToBufferSpec", "buffer_name"): _D,
    ("InputToConstantInputSpec", "name"): _I,  # a placeholder of forward(): code
    ("InputToCustomObjSpec", "custom_obj_name"): Kind.REFUSED,
    ("InputToParameterSpec", "parameter_name"): _D,
    ("InputToTensorConstantSpec", "tensor_constant_name"): _D,
    ("ModuleCallEntry", "fqn"): _D,
    ("ModuleCallSignature", "in_spec"): Kind.TREESPEC,
    ("ModuleCallSignature", "out_spec"): Kind.TREESPEC,
    ("ModuleCallSignature", "forward_arg_names"): _I,  # def forward(self, <these>)
    ("NamedArgument", "name"): _A,
    ("NamedTupleDef", "field_names"): _I,
    ("Node", "target"): Kind.OPERATOR,
    ("Node", "name"): _I,
    ("Node", "metadata"): _T,  # split, json.loads'd or kept; source_fn_stack targets are
    # resolved with getattr on torch, so they must be dotted names (_check_source_fns)
    ("GraphModule", "metadata"): _T,
    ("ParameterMutationSpec", "parameter_name"): _D,
    ("SymBoolArgument", "as_name"): _I,
    ("SymExpr", "expr_str"): Kind.SYMPY,
    ("SymFloatArgument", "as_name"): _I,
    ("SymIntArgument", "as_name"): _I,
    ("TensorArgument", "name"): _I,
    ("TokenArgument", "name"): _I,
    ("UserInputMutationSpec", "user_input_name"): _I,
}
"""The class of every ``str``, ``list[str]`` or ``Dict[str, str]`` value field under ROOT."""

KEY_CLASSES: dict[tuple[str, str], Kind] = {
    ("Argument", "as_string_to_argument"): _I,
    ("ExportedProgram", "opset_version"): _I,
    ("ExportedProgram", "range_constraints"): _T,  # str() of symbols (s0, 2*s44): dict keys
    ("Graph", "tensor_values"): _I,
    ("Graph", "sym_int_values"): _I,
    ("Graph", "sym_bool_values"): _I,
    ("Graph", "sym_float_values"): _I,
    ("Graph", "custom_obj_values"): Kind.REFUSED,
    ("GraphModule", "metadata"): _T,
    ("GraphModule", "treespec_namedtuple_fields"): _D,
    ("Node", "metadata"): _T,
}
"""The class of the keys of every ``Dict[str, ...]`` field the walk can reach."""


@cache
def schema() -> dict[str, dict[str, Any]]:
    """The installed torch's ``schema.yaml``: type name -> ``{"kind", "fields"}``."""
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations, "torch is not installed"
    path = Path(next(iter(spec.submodule_search_locations))) / "_export/serde/schema.yaml"
    loaded = yaml.safe_load(path.read_text())
    return {k: v for k, v in loaded.items() if isinstance(v, dict) and "kind" in v}


Where = tuple[Any, str]  # (parent Where | None, piece): a field's path, spelled on refusal
_Item = tuple[Any, str, Where, tuple[str, str]]  # value, its type, where, (owner, field)


class Doc(NamedTuple):
    """The document checked: its archive entry (named in refusals), its longest expression."""

    entry: str
    max_expression_chars: int = MAX_EXPRESSION_CHARS


def check_document(value: Any, entry: str, max_expression_chars: int) -> None:
    """Walk a ``models/*.json`` document by the schema; raise ``UnsafeArchiveError``
    naming the first field whose value does not fit its type or class."""
    doc = Doc(entry, max_expression_chars)
    stack: list[_Item] = [(value, ROOT, (None, ROOT), (ROOT, ""))]
    while stack:
        _visit(*stack.pop(), doc, stack.append)


def spell(where: Where | str | None) -> str:
    """A field's path as people read it: ``ExportedProgram.graph_module.graph.nodes[3]``."""
    pieces: list[str] = []
    while isinstance(where, tuple):
        pieces.append(where[1])
        where = where[0]
    return where if isinstance(where, str) else "".join(reversed(pieces))


def _refuse(doc: Doc, where: Where | str, why: str, reason: str = "unsafe_name") -> Exception:
    return UnsafeArchiveError(reason, f"{spell(where)}: {why}", doc.entry)


@cache
def _generic_parts(type_name: str) -> tuple[str, str] | None:
    """``("List", "Node")`` for ``List[Node]`` (also Optional, ``Dict[str,``); else None."""
    found = re.fullmatch(r"(List|Optional|Dict\[str,)\s*\[?(.*)\]", type_name)
    return (found.group(1), found.group(2)) if found else None


@cache
def _definition(type_name: str) -> tuple[str, dict[str, str], frozenset[Any]] | None:
    """(kind, field -> type, the names or enum values) of a schema type."""
    definition = schema().get(type_name)
    if definition is None:
        return None
    fields = definition["fields"]
    if definition["kind"] == "enum":
        return "enum", {}, frozenset(fields.values())
    return definition["kind"], {k: v["type"] for k, v in fields.items()}, frozenset(fields)


def _visit(
    value: Any,
    type_name: str,
    where: Where,
    field: tuple[str, str],
    doc: Doc,
    push: Callable[[_Item], None],
) -> None:
    """Check ``value`` against ``type_name`` (its own part) and push its members."""
    generic = _generic_parts(type_name)
    if generic is not None:
        _generic(*generic, value, where, field, doc, push)
    elif type_name == "str":
        check_string(FIELD_CLASSES.get(field), value, where, doc)
    elif type_name in grammars.PRIMITIVES:
        if problem := grammars.primitive(type_name, value):
            raise _refuse(doc, where, problem, "invalid_program")
    else:
        _composite(type_name, value, where, doc, push)


def _generic(
    outer: str,
    inner: str,
    value: Any,
    where: Where,
    field: tuple[str, str],
    doc: Doc,
    push: Callable[[_Item], None],
) -> None:
    if outer == "Optional":
        if value is not None:
            push((value, inner, where, field))
    elif outer == "List":
        if not isinstance(value, list):
            raise _refuse(doc, where, "expected a list", "invalid_program")
        for i, item in enumerate(value):
            push((item, inner, (where, f"[{i}]"), field))
    else:  # Dict[str, inner]: the keys are strings of their own class
        if not isinstance(value, dict):
            raise _refuse(doc, where, "expected an object", "invalid_program")
        kind = KEY_CLASSES.get(field)
        for key, item in value.items():
            check_string(kind, key, (where, f" key {str(key)[:80]!r}"), doc)
            push((item, inner, (where, f"[{key!r}]"), field))
        if field == ("Node", "metadata") and isinstance(value.get("source_fn_stack"), str):
            _check_source_fns(value["source_fn_stack"], (where, "['source_fn_stack']"), doc)


def _composite(
    type_name: str, value: Any, where: Where, doc: Doc, push: Callable[[_Item], None]
) -> None:
    definition = _definition(type_name)
    if definition is None:
        raise _refuse(doc, where, f"unknown schema type {type_name}", "invalid_program")
    kind, fields, names = definition
    if kind == "enum":
        if type(value) is not int or value not in names:
            raise _refuse(doc, where, f"not a value of {type_name}", "invalid_program")
        return
    if not isinstance(value, dict):
        raise _refuse(doc, where, f"expected a {type_name} object", "invalid_program")
    if not names.issuperset(value) or (kind == "union" and len(value) != 1):
        why = f"not a {type_name}: fields {sorted(value)[:8]}"
        raise _refuse(doc, where, why, "invalid_program")
    if type_name == "Graph":
        _check_graph_inputs(value.get("inputs"), (where, ".inputs"), doc)
    for name, member in value.items():
        push((member, fields[name], (where, f".{name}"), (type_name, name)))


def _check_graph_inputs(inputs: Any, where: Where, doc: Doc) -> None:
    """A graph input that is a string constant is a string literal (see FIELD_CLASSES)."""
    for i, argument in enumerate(inputs if isinstance(inputs, list) else ()):
        if isinstance(argument, dict) and "as_string" in argument:
            check_string(Kind.LITERAL, argument["as_string"], (where, f"[{i}].as_string"), doc)


def _check_source_fns(text: str, path: Where, doc: Doc) -> None:
    """``name,target`` items split by ``;``: ``target`` is resolved by ``getattr``."""
    for item in text.split(";"):
        name, _, target = item.partition(",")
        check_string(Kind.IDENTIFIER, name, path, doc)
        check_string(Kind.DOTTED_NAME, target, path, doc)


def check_string(kind: Kind | None, value: Any, path: Where | str, doc: Doc) -> None:
    """Refuse ``value`` unless it is a string that fits ``kind`` (None: unclassified)."""
    if kind is None:
        why = "a field this server has not classified (a newer torch?)"
        raise _refuse(doc, path, why, "unclassified_field")
    if kind is Kind.REFUSED:
        raise _refuse(doc, path, "custom (torchbind) objects are not accepted", "custom_object")
    if not isinstance(value, str):
        raise _refuse(doc, path, f"expected a string, found {type(value).__name__}")
    if kind is Kind.SYMPY:
        check_sympy_expr(value, f"{doc.entry}: {spell(path)}", doc.max_expression_chars)
    elif kind is Kind.GUARD:
        check_guard_code(value, f"{doc.entry}: {spell(path)}", doc.max_expression_chars)
    elif kind is Kind.OPERATOR:
        refused = operators.refusal(value)
        if refused:
            message = f"operator {value[:100]!r} is not allowed: {refused}"
            raise _refuse(doc, path, message, "unsafe_operator")
    elif problem := _CHECKS[kind](value):
        reason = "unsafe_string" if kind in (Kind.LITERAL, Kind.DEVICE, _T) else "unsafe_name"
        shown = "this" if kind is Kind.TREESPEC else repr(value[:80])  # the problem quotes
        raise _refuse(doc, path, f"{shown} is not a valid {kind.value}: {problem}", reason)


_CHECKS: dict[Kind, Callable[[str], str]] = {
    Kind.IDENTIFIER: grammars.identifier,
    Kind.ARGUMENT_NAME: grammars.argument_name,
    Kind.DOTTED_NAME: grammars.dotted_name,
    Kind.DEVICE: grammars.device_type,
    Kind.LITERAL: grammars.literal,
    Kind.TREESPEC: grammars.treespec,
    Kind.FREE_TEXT: lambda v: "" if len(v) <= MAX_TEXT_CHARS else "too long",
}
