"""An adversarial corpus generated from torch's program schema (issue 18).

Every string of a few real programs' ``models/model.json`` is found by walking it by the
schema's own types (each known as, e.g., ``TensorArgument.name``); a payload that touches a
marker file if it ever runs as Python is planted there, one site per archive. The corpus
says apart from the validator what must happen: the refusal reason of the field's class, or
``"inert"`` for free text (accepted; it must load without running). :func:`cases` serves the
sandbox tests here and the end-to-end ones over HTTP.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from pteforge.server.sandbox import pt2_schema as S
from tests.sandbox.archives import dynamic_program, read_archive, write_archive
from tests.security.payloads import StringArgument, StringInput, _renamed

MODEL_JSON = "models/model.json"
INERT = "inert"
Case = tuple[str, Path, str]  # name, archive, the refusal reason or INERT
Path_ = tuple[Any, ...]  # keys and indices from the document's root


class CorpusCase(NamedTuple):
    """A case, with the field its refusal message must name."""

    name: str
    archive: Path
    expected: str  # the refusal reason, or INERT
    field: str  # a piece of the schema path the refusal names (e.g. ``expr_str``)


VARIANTS: dict[str, Callable[[Path], str]] = {
    "default_arg": lambda m: f"x=__import__('os').system('touch {m}')",
    "call": lambda m: f"__import__('pathlib').Path('{m}').touch()",
    "newline": lambda m: f"x\n__import__('pathlib').Path('{m}').touch()\n",
    "semicolon": lambda m: f"x; __import__('pathlib').Path('{m}').touch()",
    "single_quote": lambda m: f"x'); __import__('pathlib').Path('{m}').touch(); ('",
    "double_quote": lambda m: f'x" + str(__import__("pathlib").Path("{m}").touch()) + "',
}
"""Python source that touches the marker ``m``, shaped to escape each kind of context."""

_K = S.Kind
REASONS = {_K.IDENTIFIER: "unsafe_name", _K.ARGUMENT_NAME: "unsafe_name",
           _K.DOTTED_NAME: "unsafe_name", _K.TREESPEC: "unsafe_name",
           _K.DEVICE: "unsafe_string", _K.LITERAL: "unsafe_string",
           _K.OPERATOR: "unsafe_operator", _K.SYMPY: "unsafe_expression",
           _K.GUARD: "unsafe_guard_code", _K.REFUSED: "custom_object",
           _K.FREE_TEXT: INERT}  # fmt: skip
"""The refusal of a payload in a field of each class (free text: accepted, inert)."""


class Buffers(nn.Module):
    """Parameters, a buffer and a lifted tensor constant (dotted FQNs)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.register_buffer("scale", torch.full((1,), 2.0))
        self.offset = torch.tensor([1.0, 2.0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.scale + self.offset.sum()


class KwargsDict(nn.Module):
    """A dictionary input and a keyword input: pytree contexts with keys."""

    def forward(self, x: torch.Tensor, d: dict[str, torch.Tensor], *, y: torch.Tensor) -> Any:
        return x + d["k"] + y


class DictKey(nn.Module):
    """A dictionary input whose key ``ep.module()`` puts, repr()'d, in a guard message."""

    def forward(self, x: torch.Tensor, d: dict[str, torch.Tensor]) -> torch.Tensor:
        return x + next(iter(d.values()))


def _programs() -> dict[str, torch.export.ExportedProgram]:
    x = torch.ones(2, 3)
    return {
        "rounding": torch.export.export(StringArgument(), (x,)),
        "string_input": torch.export.export(StringInput(), (x, "floor")),
        "buffers": torch.export.export(Buffers().eval(), (x,)),
        "dynamic": dynamic_program(),
        "kwargs": torch.export.export(KwargsDict(), (x, {"k": x}), {"y": x}),
    }


PROGRAMS = ("rounding", "string_input", "buffers", "dynamic", "kwargs")


def base_archives(directory: Path) -> dict[str, Path]:
    """The benign programs the payloads are planted in, saved as uploaded."""
    paths = {name: directory / f"{name}.pt2" for name in PROGRAMS}
    if not all(path.exists() for path in paths.values()):  # built once per directory
        directory.mkdir(parents=True, exist_ok=True)
        for name, program in _programs().items():
            torch.export.save(program, paths[name])
    return paths


def _parts(type_name: str) -> tuple[str, str]:
    found = re.fullmatch(r"(List|Optional|Dict\[str,)\s*\[?(.*)\]", type_name)
    return (found.group(1), found.group(2)) if found else ("", type_name)


def string_sites(doc: Any) -> Iterator[tuple[Path_, bool, str, S.Kind | None]]:
    """(path, is a key, ``Owner.field``, class) of every string of ``doc``, by the schema."""
    stack: list[tuple[Any, str, Path_, tuple[str, str]]] = [(doc, S.ROOT, (), (S.ROOT, ""))]
    while stack:
        value, type_name, path, field = stack.pop()
        outer, inner = _parts(type_name)
        if outer == "Optional":
            stack.extend([(value, inner, path, field)] if value is not None else [])
        elif outer == "List":
            stack.extend((v, inner, (*path, i), field) for i, v in enumerate(value))
        elif outer:  # a dictionary: its keys are strings too
            for key, item in value.items():
                yield (*path, key), True, ".".join(field), S.KEY_CLASSES.get(field)
                stack.append((item, inner, (*path, key), field))
        elif type_name == "str":
            yield path, False, ".".join(field), S.FIELD_CLASSES.get(field)
        elif isinstance(value, dict) and S.schema()[type_name]["kind"] != "enum":
            fields = S.schema()[type_name]["fields"]
            for name, member in value.items():
                stack.append((member, fields[name]["type"], (*path, name), (type_name, name)))


def expected(path: Path_, is_key: bool, field: str, kind: S.Kind | None) -> str:
    """What must happen to a payload planted at this site (the policy, stated apart from
    the validator): per-component metadata and graph inputs have classes of their own."""
    if field == "Node.metadata" and not is_key and path[-1] == "source_fn_stack":
        return "unsafe_name"  # its targets are resolved with getattr on torch
    if field == "Argument.as_string" and path[-4:-2] == ("graph", "inputs"):
        return "unsafe_string"  # a string input's value: the guard quotes it unescaped
    assert kind is not None, f"unclassified {field}"
    return REASONS[kind]


def _site_label(path: Path_, is_key: bool, field: str) -> str:
    label = field + ("-key" if is_key else "")
    if path[-4:-2] == ("graph", "inputs"):
        label += "-graph_input"
    if field in {"Node.metadata", "GraphModule.metadata"}:
        label += "-" + str(path[-1] if not is_key else "")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", label)


def _plant(doc: Any, path: Path_, is_key: bool, payload: str) -> Any:
    doc = copy.deepcopy(doc)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if is_key:
        parent[payload] = parent.pop(path[-1])
    else:
        parent[path[-1]] = payload
    return doc


def _save(directory: Path, name: str, base: Path, doc: Any) -> Path:
    root, entries = read_archive(base)
    entries[MODEL_JSON] = json.dumps(doc).encode()
    return write_archive(directory / f"{name}.pt2", root, entries)


def marker_for(markers: Path, case: str) -> Path:
    """The file the payloads of ``case`` touch if they ever run."""
    return markers / f"PWNED-{case}"


def _named_piece(path: Path_, is_key: bool) -> str:
    """The last name of a site's schema path (a key's dictionary, not the key)."""
    return next(str(p) for p in reversed(path[:-1] if is_key else path) if isinstance(p, str))


def site_cases(directory: Path, markers: Path) -> Iterator[CorpusCase]:
    """One archive per (program, distinct site, variant). A refused site gets every variant;
    a free-text site one (they rotate), so the loads they need stay few."""
    turn = 0
    for program, base in base_archives(directory / "base").items():
        doc = json.loads(read_archive(base)[1][MODEL_JSON])
        seen: set[str] = set()
        for path, is_key, field, kind in string_sites(doc):
            label = _site_label(path, is_key, field)
            if label in seen:
                continue
            seen.add(label)
            outcome = expected(path, is_key, field, kind)
            variants = sorted(VARIANTS)
            if outcome == INERT:
                variants, turn = [variants[turn % len(variants)]], turn + 1
            for variant in variants:
                name = f"{program}.{label}.{variant}"
                planted = _plant(doc, path, is_key, VARIANTS[variant](marker_for(markers, name)))
                archive = _save(directory, name, base, planted)
                yield CorpusCase(name, archive, outcome, _named_piece(path, is_key))


def _in_spec_context(old: Any, new: Any) -> Callable[[Any], None]:
    """Replace the pytree context ``old`` (decoded) of the root signature's ``in_spec``."""

    def edit(doc: Any) -> None:
        signature = doc["graph_module"]["module_call_graph"][0]["signature"]
        version, root = json.loads(signature["in_spec"])
        nodes = [root]
        while nodes:
            node = nodes.pop()
            node["context"] = (
                json.dumps(new) if node["context"] == json.dumps(old) else node["context"]
            )
            nodes.extend(node["children_spec"])
        signature["in_spec"] = json.dumps([version, root])

    return edit


def _everywhere(old: str, new: str) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        doc["graph_module"] = _renamed(doc["graph_module"], old, new)

    return edit


def _set(keys: Path_, value: str) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        for step in keys[:-1]:
            doc = doc[step]
        doc[keys[-1]] = value

    return edit


SPEC = ("graph_module", "signature", "input_specs")
# name -> (program, the edit given a payload, variant, expected reason, field named)
SPECIAL: dict[str, tuple[str, Callable[[str], Callable[[Any], None]], str, str, str]] = {
    "live.tensor_input_name": ("rounding", lambda p: _everywhere("x", p), "default_arg",
                               "unsafe_name", "name"),
    "live.constant_input_name": ("string_input", lambda p: _set(
        (*SPEC, 1, "constant_input", "name"), "mode=" + p), "call", "unsafe_name", "name"),
    "live.constant_input_value": ("string_input", lambda p: _everywhere(
        "floor", f"floor' and {p} or '"), "call", "unsafe_string", "as_string"),
    "special.source_fn_stack": ("buffers", lambda p: _set(
        ("graph_module", "graph", "nodes", 0, "metadata", "source_fn_stack"), "fc," + p),
        "call", "unsafe_name", "source_fn_stack"),
    "special.in_spec_kwargs_key": ("kwargs", lambda p: _in_spec_context(["y"], [f"y={p}"]),
                                   "call", "unsafe_name", "in_spec"),
    "special.in_spec_dict_key": ("kwargs", lambda p: _in_spec_context(["k"], [p]),
                                 "double_quote", "unsafe_name", "in_spec"),
    "special.in_spec_enum": ("kwargs", lambda p: _in_spec_context(
        ["k"], [{"__enum__": True, "fqn": "os:environ", "name": p}]), "call",
        "unsafe_name", "in_spec"),
}  # fmt: skip
LIVE = ("live.tensor_input_name", "live.constant_input_name", "live.constant_input_value",
        "live.dict_key")  # fmt: skip
"""Cases whose payload runs in plain ``torch.export.load`` + ``ep.module()`` (and a call)."""


def special_cases(directory: Path, markers: Path) -> Iterator[CorpusCase]:
    """Hand-placed payloads: consistent renames (live exploits), components of metadata and
    pytree contexts, and a dictionary key torch exports itself (sample inputs and in_spec)."""
    bases = base_archives(directory / "base")
    for name, (program, edit, variant, reason, field) in SPECIAL.items():
        doc = json.loads(read_archive(bases[program])[1][MODEL_JSON])
        edit(VARIANTS[variant](marker_for(markers, name)))(doc)
        yield CorpusCase(name, _save(directory, name, bases[program], doc), reason, field)
    key = VARIANTS["double_quote"](marker_for(markers, "live.dict_key"))
    x = torch.ones(2, 3)
    archive = directory / "live.dict_key.pt2"
    torch.export.save(torch.export.export(DictKey(), (x, {key: x})), archive)
    yield CorpusCase("live.dict_key", archive, "unsafe_name", "in_spec")


def detailed_cases(directory: Path, markers: Path) -> Iterator[CorpusCase]:
    """Every case: the schema's sites, then the hand-placed ones."""
    yield from site_cases(directory, markers)
    yield from special_cases(directory, markers)


def cases(directory: Path, markers: Path) -> Iterator[Case]:
    """``(case name, archive, expected)`` for every case, ``expected`` the refusal reason
    or ``"inert"``; a case's payload touches ``marker_for(markers, name)`` if it runs."""
    for case in detailed_cases(directory, markers):
        yield case.name, case.archive, case.expected
