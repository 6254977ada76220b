"""Pytree specs whose node types torch does not know, read as plain containers.

``torch.export.export(transformers.BertModel(cfg), (ids,))`` returns a ``ModelOutput`` (an
``OrderedDict``-like dataclass); the saved program's ``out_spec`` names its class
(``transformers.modeling_outputs.BaseModelOutputWithPoolingAndCrossAttentions``) and torch
refuses to deserialize a type its pytree registry lacks. The archive only *names* the
type: nothing here imports or builds a class an archive names. A node of an unknown type
is read instead as

- a ``dict`` when its context is a JSON list of distinct string keys, one per child (what
  a ``ModelOutput`` saves: ``["last_hidden_state", "pooler_output"]``, in order), exactly
  how torch saves a ``dict``;
- a ``tuple`` when its context is JSON ``null`` (the children are positional);

and anything else is refused with one line naming the type and the remedy. The rewrite is
per document, before torch reads it: torch's global registry is never changed.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from pteforge.manager.errors import ProgramInputError

DICT_TYPE = "builtins.dict"
TUPLE_TYPE = "builtins.tuple"
REMEDY = "export with return_dict=False, or return a tuple or a dict of tensors"
_SPECS = (("in_spec", "inputs"), ("out_spec", "outputs"))


def known_types() -> frozenset[str]:
    """The pytree type names this process's torch deserializes (its registry, read only)."""
    from torch.utils._pytree import SERIALIZED_TYPE_TO_PYTHON_TYPE

    return frozenset(SERIALIZED_TYPE_TO_PYTHON_TYPE)


def readable_program(document: bytes, known: Collection[str] | None = None) -> bytes:
    """A ``models/*.json`` document whose module-call specs use only ``known`` types (default
    :func:`known_types`): ``document`` itself when they already do, else a rewritten copy.
    A document that is not the expected JSON is returned as is, for torch to refuse."""
    try:
        program = json.loads(document)
        entries = program["graph_module"]["module_call_graph"]
    except (ValueError, RecursionError, TypeError, KeyError):
        return document
    types = known_types() if known is None else known
    changed = False
    for signature in _signatures(entries):
        for field, what in _SPECS:
            spec = signature.get(field)
            if isinstance(spec, str) and (fixed := readable_spec(spec, types, what)) != spec:
                signature[field] = fixed
                changed = True
    return json.dumps(program).encode() if changed else document


def _signatures(entries: Any) -> list[dict[str, Any]]:
    """The ``signature`` objects of a module call graph's entries (the root's, and those of
    submodules exported with ``preserve_module_call_signature``)."""
    found = []
    for entry in entries if isinstance(entries, list) else ():
        signature = entry.get("signature") if isinstance(entry, dict) else None
        if isinstance(signature, dict):
            found.append(signature)
    return found


def readable_spec(spec: str, known: Collection[str], what: str = "outputs") -> str:
    """``spec`` (pytree JSON, protocol 1) with every node of a type not in ``known`` read as
    a ``dict`` or ``tuple`` (see the module docstring); ``spec`` itself when nothing changes.
    Raises ``ProgramInputError`` naming the type when a node can be read as neither;
    ``what`` (``inputs`` or ``outputs``) says where it was."""
    try:
        version, root = json.loads(spec)
    except (ValueError, TypeError, RecursionError):
        return spec
    if version != 1 or not isinstance(root, dict):
        return spec
    changed = False
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.get("type")
        if kind is not None and kind not in known:
            node["type"] = _plain_type(node, str(kind), what)
            changed = True
        children = node.get("children_spec")
        if isinstance(children, list):
            stack.extend(child for child in children if isinstance(child, dict))
    return json.dumps([version, root]) if changed else spec


def _plain_type(node: dict[str, Any], kind: str, what: str) -> str:
    """The plain container an unknown node is read as, or a refusal naming ``kind``."""
    children = node.get("children_spec")
    count = len(children) if isinstance(children, list) else -1
    decoded = _decoded(node.get("context"))
    if decoded is None:
        return TUPLE_TYPE
    if _string_keys(decoded, count):
        return DICT_TYPE
    raise ProgramInputError(
        f"the program's {what} are a {kind[:200]}, a pytree type torch does not know here "
        f"and whose context is not a list of keys; {REMEDY}"
    )


def _decoded(context: Any) -> Any:
    """A context decoded as plain JSON (no hooks: an enum object stays a dict), or ``...``
    when it is not a JSON string."""
    try:
        return json.loads(context) if isinstance(context, str) else ...
    except (ValueError, RecursionError):
        return ...


def _string_keys(decoded: Any, count: int) -> bool:
    """A list of ``count`` distinct strings: the keys of a dict, one per child."""
    return (
        isinstance(decoded, list)
        and len(decoded) == count
        and all(isinstance(key, str) for key in decoded)
        and len(set(decoded)) == count
    )
