"""Live exploits and benign look-alikes, as uploads: programs whose serialized names or
strings carry Python source.

Each payload, if it ever runs, touches a marker file; run inside a confined child, the touch
is refused and the refusal (naming the marker) surfaces in an error. Either way the marker's
path shows up, so "absent everywhere" proves the payload never ran.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tests.sandbox.archives import read_archive, write_archive

MODEL_JSON = "models/model.json"


class StringArgument(torch.nn.Module):
    """A string argument of a real operator."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.div(x, 2.0, rounding_mode="floor") + 1


class StringInput(torch.nn.Module):
    """A string-typed input too (a constant of the graph: ``/v2`` cannot feed it)."""

    def forward(self, x: torch.Tensor, mode: str) -> torch.Tensor:
        return torch.div(x, 2.0, rounding_mode="floor") + 1


def code(marker: Path) -> str:
    """Python source that touches ``marker``."""
    return f"__import__('pathlib').Path({str(marker)!r}).touch()"


def _renamed(node: Any, old: str, new: str) -> Any:
    """``node`` with every string (and key) equal to ``old`` replaced by ``new``."""
    if isinstance(node, dict):
        return {(new if k == old else k): _renamed(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_renamed(v, old, new) for v in node]
    return new if node == old else node


def _constant_input_name(doc: Any, marker: Path) -> Any:
    spec = doc["graph_module"]["signature"]["input_specs"][1]["constant_input"]
    spec["name"] = f"mode={code(marker)}"
    return doc


def _constant_input_value(doc: Any, marker: Path) -> Any:
    """ep.module() guards a string input with f"{src} == '{value}'", exec'd unescaped."""
    return _renamed(doc, "floor", f"floor' and {code(marker)} or '")


def _tensor_input_name(doc: Any, marker: Path) -> Any:
    return _renamed(doc, "x", f"x={code(marker)}")


def _node_name(doc: Any, marker: Path) -> Any:
    return _renamed(doc, "add", f"add = {code(marker)}\n    add")


def _rounding_mode(doc: Any, marker: Path) -> Any:
    return _renamed(doc, "floor", f"floor'); {code(marker)}; ('")


def _stack_trace(doc: Any, marker: Path) -> Any:
    for node in doc["graph_module"]["graph"]["nodes"]:
        node.setdefault("metadata", {})["stack_trace"] = f'"""\n{code(marker)}\n"""'
    return doc


STRING_INPUT_CASES = {"constant_input_name", "constant_input_value"}
"""The cases planted in :class:`StringInput`; the others in :class:`StringArgument`."""

EDITS: dict[str, Callable[[Any, Path], Any]] = {
    "constant_input_name": _constant_input_name,
    "constant_input_value": _constant_input_value,
    "tensor_input_name": _tensor_input_name,
    "node_output_name": _node_name,
    "string_argument": _rounding_mode,
    "stack_trace": _stack_trace,
}
"""Each payload's place. The names become code in torch's generated ``forward``; the
constant input's value becomes code in the guard function ``ep.module()`` builds."""


def benign(directory: Path, string_input: bool = False) -> Path:
    """A program the payloads are planted in, saved as uploaded."""
    directory.mkdir(parents=True, exist_ok=True)
    x = torch.ones(2, 3)
    program = (
        torch.export.export(StringInput(), (x, "floor"))
        if string_input
        else torch.export.export(StringArgument(), (x,))
    )
    path = directory / ("string-input.pt2" if string_input else "string-argument.pt2")
    torch.export.save(program, path)
    return path


def hostile(directory: Path, case: str, marker: Path) -> Path:
    """A ``benign`` archive with the payload of ``case`` planted."""
    root, entries = read_archive(benign(directory, case in STRING_INPUT_CASES))
    doc = EDITS[case](json.loads(entries[MODEL_JSON]), marker)
    entries[MODEL_JSON] = json.dumps(doc).encode()
    return write_archive(directory / f"{case}.pt2", root, entries)
