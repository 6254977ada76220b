"""Output pytree specs whose node types torch does not know, read as plain containers.

``torch.export.export(transformers.BertModel(cfg), (ids,))`` returns a ``ModelOutput`` (an
``OrderedDict``-like dataclass); the saved program's ``out_spec`` names its class
(``transformers.modeling_outputs.BaseModelOutputWithPoolingAndCrossAttentions``) and torch
refuses to deserialize a type its pytree registry lacks. The archive only *names* the
type: nothing here imports or builds a class an archive names. An output node of an
unknown type is read instead as

- a ``dict`` when its context is a JSON list of distinct string keys, one per child (what
  a ``ModelOutput`` saves: ``["last_hidden_state", "pooler_output"]``, in order), exactly
  how torch saves a ``dict``;
- a ``tuple`` when its context is JSON ``null`` (the children are positional);

and anything else is refused with one line naming the type and the remedy. Input specs are
never rewritten, only refused when they hold an unknown type: ``ep.module()`` writes the keys
of the inputs' kwargs dictionary into ``def forward(...)``, and the upload validator checks
those keys as identifiers only where the archive itself says ``(tuple, dict)``
(:mod:`pteforge.server.sandbox.pt2_grammars`); a rewrite must not make a dictionary there.
The rewrite is per document, before torch reads it: torch's global registry is never changed.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from typing import Any

from pteforge.manager.errors import ProgramInputError

DICT_TYPE = "builtins.dict"
TUPLE_TYPE = "builtins.tuple"
REMEDY = "export with return_dict=False, or return a tuple or a dict of tensors"
INPUTS_REMEDY = "pass tensors, or tuples, lists and dicts of them, to torch.export.export"


def known_types() -> frozenset[str]:
    """The pytree type names this process's torch deserializes (its registry, read only)."""
    from torch.utils._pytree import SERIALIZED_TYPE_TO_PYTHON_TYPE

    return frozenset(SERIALIZED_TYPE_TO_PYTHON_TYPE)


def readable_program(document: bytes, known: Collection[str] | None = None) -> bytes:
    """A ``models/*.json`` document whose module-call specs use only ``known`` types (default
    :func:`known_types`): ``document`` itself when they already do, else a copy with its
    output specs rewritten. Raises ``ProgramInputError`` for a type that cannot be read (any
    unknown input type). A document that is not the expected JSON is returned as is, for
    torch to refuse."""
    try:
        program = json.loads(document)
        entries = program["graph_module"]["module_call_graph"]
    except (ValueError, RecursionError, TypeError, KeyError):
        return document
    types = known_types() if known is None else known
    changed = False
    for signature in _signatures(entries):
        if isinstance(inputs := signature.get("in_spec"), str):
            check_input_spec(inputs, types)
        spec = signature.get("out_spec")
        if isinstance(spec, str) and (fixed := readable_spec(spec, types)) != spec:
            signature["out_spec"] = fixed
            changed = True
    return json.dumps(program).encode() if changed else document


def readable_spec(spec: str, known: Collection[str]) -> str:
    """The output spec ``spec`` (pytree JSON, protocol 1) with every node of a type not in
    ``known`` read as a ``dict`` or ``tuple`` (see the module docstring); ``spec`` itself when
    nothing changes. Raises ``ProgramInputError`` naming a type it can read as neither."""
    root = _root(spec)
    changed = False
    for node in _nodes(root):
        kind = node.get("type")
        if kind is not None and kind not in known:
            node["type"] = _plain_type(node, str(kind))
            changed = True
    return json.dumps([1, root]) if changed else spec


def check_input_spec(spec: str, known: Collection[str]) -> None:
    """Raise ``ProgramInputError`` naming the first type of the input spec ``spec`` that is
    not in ``known`` (see the module docstring: inputs are never rewritten)."""
    for node in _nodes(_root(spec)):
        kind = node.get("type")
        if kind is not None and kind not in known:
            raise ProgramInputError(
                f"the program's inputs hold a {str(kind)[:200]}, a pytree type torch does not "
                f"know here; {INPUTS_REMEDY}"
            )


def _signatures(entries: Any) -> list[dict[str, Any]]:
    """The ``signature`` objects of a module call graph's entries (the root's, and those of
    submodules exported with ``preserve_module_call_signature``)."""
    found = []
    for entry in entries if isinstance(entries, list) else ():
        signature = entry.get("signature") if isinstance(entry, dict) else None
        if isinstance(signature, dict):
            found.append(signature)
    return found


def _root(spec: str) -> Any:
    """The root node of a protocol-1 spec; None for anything else (left for torch)."""
    try:
        version, root = json.loads(spec)
    except (ValueError, TypeError, RecursionError):
        return None
    return root if version == 1 else None


def _nodes(root: Any) -> Iterator[dict[str, Any]]:
    """Every node (a JSON object) of a spec, the root first."""
    stack = [root] if isinstance(root, dict) else []
    while stack:
        node = stack.pop()
        yield node
        children = node.get("children_spec")
        if isinstance(children, list):
            stack.extend(child for child in children if isinstance(child, dict))


def _plain_type(node: dict[str, Any], kind: str) -> str:
    """The plain container an unknown output node is read as, or a refusal naming ``kind``."""
    children = node.get("children_spec")
    count = len(children) if isinstance(children, list) else -1
    decoded = _decoded(node.get("context"))
    if decoded is None:
        return TUPLE_TYPE
    if _string_keys(decoded, count):
        return DICT_TYPE
    raise ProgramInputError(
        f"the program's outputs are a {kind[:200]}, a pytree type torch does not know here "
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
