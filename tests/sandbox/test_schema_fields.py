"""Every string field of torch's program schema is classified, and each class's grammar holds.

The walk of :mod:`pteforge.server.sandbox.pt2_schema` reads the ``schema.yaml`` of the
installed torch; a string field it can reach and the tables lack would be refused on every
upload, so this test fails first and names it: classify it (say what it may hold, after
reading how torch's deserialiser uses it) before upgrading torch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from pteforge.server.sandbox import UnsafeArchiveError
from pteforge.server.sandbox import pt2_schema as S


def _types_in(type_name: str) -> list[str]:
    return [t for t in re.split(r"[\[\], ]+", type_name) if t]


def _reachable() -> Iterator[tuple[str, str, str]]:
    """(owner, field, type) of every field reachable from the document's root."""
    seen, todo = set(), [S.ROOT]
    while todo:
        owner = todo.pop()
        if owner in seen or owner not in S.schema():
            continue
        seen.add(owner)
        for field, spec in S.schema()[owner]["fields"].items():
            if S.schema()[owner]["kind"] == "enum":
                continue
            yield owner, field, spec["type"]
            todo.extend(_types_in(spec["type"]))


def test_every_reachable_string_field_is_classified() -> None:
    values, keys = set(), set()
    for owner, field, type_name in _reachable():
        parts = _types_in(type_name)
        if type_name.startswith("Dict[str,"):
            keys.add((owner, field))
            parts = parts[2:]  # the value type
        if "str" in parts:
            values.add((owner, field))
    assert values - set(S.FIELD_CLASSES) == set(), "unclassified string fields"
    assert keys - set(S.KEY_CLASSES) == set(), "unclassified dictionary keys"
    assert set(S.FIELD_CLASSES) - values == set(), "classified fields the schema lacks"
    assert set(S.KEY_CLASSES) - keys == set(), "classified keys the schema lacks"


def test_a_field_a_newer_torch_adds_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {name: dict(spec) for name, spec in S.schema().items()}
    fields = dict(schema["Device"]["fields"])
    fields["vendor_hint"] = {"type": "str"}
    schema["Device"] = {**schema["Device"], "fields": fields}
    monkeypatch.setattr(S, "schema", lambda: schema)
    S._definition.cache_clear()  # the walk's per-type cache, built from the real schema
    doc: dict[str, Any] = {"graph_module": {"graph": {"inputs": [
        {"as_device": {"type": "cpu", "vendor_hint": "x"}}
    ]}}}  # fmt: skip
    try:
        with pytest.raises(UnsafeArchiveError, match=r"vendor_hint.*not classified") as info:
            S.check_document(doc, "models/m.json", 2000)
    finally:
        S._definition.cache_clear()
    assert info.value.reason == "unclassified_field"


def _spec(kwargs: list[Any], keys: list[Any] | None = None) -> str:
    """An ``(args, kwargs)`` pytree spec: one positional leaf (a dict with ``keys`` if given),
    keyword leaves named ``kwargs``."""
    leaf = {"type": None, "context": None, "children_spec": []}
    arg = leaf if keys is None else {"type": "builtins.dict", "context": json.dumps(keys),
                                     "children_spec": [leaf] * len(keys)}  # fmt: skip
    args = {"type": "builtins.tuple", "context": "null", "children_spec": [arg]}
    named = {"type": "builtins.dict", "context": json.dumps(kwargs),
             "children_spec": [leaf] * len(kwargs)}  # fmt: skip
    return json.dumps([1, {"type": "builtins.tuple", "context": "null",
                           "children_spec": [args, named]}])  # fmt: skip


NAMEDTUPLE = json.dumps([1, {"type": "collections.namedtuple", "context": "my.NT",
                             "children_spec": []}])  # fmt: skip

GOOD = {
    S.Kind.IDENTIFIER: ["x", "p_fc1_weight", "_tensor_constant0", "L__self___fc"],
    S.Kind.ARGUMENT_NAME: ["self", "rounding_mode", "from", ""],
    S.Kind.DOTTED_NAME: ["", "fc1.weight", "layers.0.attn.q_proj", "model.encoder.0"],
    S.Kind.DEVICE: ["cpu", "meta"],
    S.Kind.LITERAL: ["floor", "tanh", "bij,bjk->bik", "", "sum"],
    S.Kind.FREE_TEXT: ["floor", 'File "m.py", line 3\n  x = 1', "'); import os; ('"],
    S.Kind.TREESPEC: [_spec(["y"]), _spec([]), NAMEDTUPLE, _spec(["y"], ["k 1", 3])],
}
BAD = {
    S.Kind.IDENTIFIER: ["x=__import__('os')", "a b", "x\n", "import", "a.b", "", "1x"],
    S.Kind.ARGUMENT_NAME: ["a=1", "a;b", "x)"],
    S.Kind.DOTTED_NAME: ["a..b", "a.b;c", ".a", "a/b", "a.b()", "self.x = 1"],
    S.Kind.DEVICE: ["cpu'); x", "gpu", ""],
    S.Kind.LITERAL: ["floor' and x or '", 'a"b', "a\\b", "a\nb", "x" * 4097],
    S.Kind.FREE_TEXT: ["x" * (S.MAX_TEXT_CHARS + 1)],
    S.Kind.TREESPEC: [
        _spec(["y=__import__('os')"]),  # a kwargs name: def forward(self, <it>) without names
        _spec(["y"], ['k" + str(1) + "']),  # a key: repr()'d into a double-quoted message
        _spec(["y"], [{"__enum__": True, "fqn": "os:environ", "name": "HOME"}]),  # an import
        NAMEDTUPLE.replace("my.NT", "my.NT()"),
        "not json",
        "[2, null]",
    ],
}
DOC = S.Doc("models/m.json")


@pytest.mark.parametrize(("kind", "value"), [(k, v) for k, vs in GOOD.items() for v in vs])
def test_each_class_accepts_what_real_programs_hold(kind: S.Kind, value: str) -> None:
    S.check_string(kind, value, "X.y", DOC)


@pytest.mark.parametrize(("kind", "value"), [(k, v) for k, vs in BAD.items() for v in vs])
def test_each_class_refuses_the_rest_naming_the_field(kind: S.Kind, value: str) -> None:
    with pytest.raises(UnsafeArchiveError, match=r"X\.y") as info:
        S.check_string(kind, value, "X.y", DOC)
    assert info.value.reason in {"unsafe_name", "unsafe_string"}


def test_a_value_of_another_type_or_shape_is_refused() -> None:
    for doc in (
        {"graph_module": {"graph": {"nodes": [{"target": 3}]}}},
        {"graph_module": {"graph": {"inputs": [{"as_tensor": {"name": "x"}, "as_int": 1}]}}},
        {"graph_module": {"graph": {"tensor_values": {"x": {"dtype": 999}}}}},
        {"graph_module": {"surprise": 1}},
    ):
        with pytest.raises(UnsafeArchiveError):
            S.check_document(doc, "models/m.json", 2000)
