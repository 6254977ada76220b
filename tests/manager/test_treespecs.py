"""Pytree types torch does not know (a ``transformers`` ``ModelOutput``) are read as plain
containers, per document, and never imported."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from pteforge.manager.errors import ProgramInputError
from pteforge.manager.loading import load_program_file
from pteforge.manager.treespecs import DICT_TYPE, TUPLE_TYPE, readable_program, readable_spec
from pteforge.server.sandbox import UnsafeArchiveError, load_validated_programs
from tests.sandbox import archives as A

KNOWN = frozenset({DICT_TYPE, TUPLE_TYPE, "builtins.list"})
LEAF: dict[str, Any] = {"type": None, "context": None, "children_spec": []}
MODEL_OUTPUT = "transformers.modeling_outputs.BaseModelOutputWithPoolingAndCrossAttentions"
HOSTILE_MODULE = "pteforge_h1_hostile_marker"


def _spec(kind: str, context: str, leaves: int = 2) -> str:
    return json.dumps([1, {"type": kind, "context": context, "children_spec": [LEAF] * leaves}])


def _root(spec: str) -> dict[str, object]:
    root: dict[str, object] = json.loads(spec)[1]
    return root


def test_a_model_output_is_read_as_a_dict_of_its_keys() -> None:
    keys = json.dumps(["last_hidden_state", "pooler_output"])
    root = _root(readable_spec(_spec(MODEL_OUTPUT, keys), KNOWN))
    assert root["type"] == DICT_TYPE
    assert root["context"] == keys  # exactly how torch saves a dict: its keys, in order


def test_a_node_without_context_is_read_as_a_tuple() -> None:
    assert _root(readable_spec(_spec("somelib.Pair", "null"), KNOWN))["type"] == TUPLE_TYPE


def test_known_types_are_left_as_they_are() -> None:
    spec = _spec(DICT_TYPE, json.dumps(["a", "b"]))
    assert readable_spec(spec, KNOWN) is spec
    document = json.dumps({"graph_module": {"module_call_graph": []}}).encode()
    assert readable_program(document, KNOWN) is document


@pytest.mark.parametrize(
    "context", ['{"a": 1}', json.dumps(["a", "a"]), json.dumps(["only_one"]), json.dumps([1, 2])]
)
def test_an_unreadable_type_is_refused_in_one_line_naming_it(context: str) -> None:
    with pytest.raises(ProgramInputError) as refused:
        readable_spec(_spec("somelib.Special", context), KNOWN)
    message = str(refused.value)
    assert "\n" not in message
    assert "outputs are a somelib.Special" in message
    assert "return_dict=False" in message and "tuple or a dict" in message


def test_input_types_are_refused_never_rewritten() -> None:
    """A kwargs dictionary's keys become parameters of def forward: the validator checks them
    as identifiers only where the archive says (tuple, dict), so no rewrite may make one."""
    keys = json.dumps(["x=print(1)"])  # a literal, but no identifier
    kwargs = {"type": "somelib.Kwargs", "context": keys, "children_spec": [LEAF]}
    args = {"type": TUPLE_TYPE, "context": "null", "children_spec": [LEAF]}
    in_spec = json.dumps(
        [1, {"type": TUPLE_TYPE, "context": "null", "children_spec": [args, kwargs]}]
    )
    signature = {"in_spec": in_spec, "out_spec": _spec(TUPLE_TYPE, "null")}
    document = {"graph_module": {"module_call_graph": [{"fqn": "", "signature": signature}]}}
    with pytest.raises(ProgramInputError, match=r"inputs hold a somelib\.Kwargs, a pytree type"):
        readable_program(json.dumps(document).encode(), KNOWN)


class _Pair(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"doubled": x * 2, "shifted": x + 1}


def _pair_archive(tmp_path: Path, kind: str, context: str | None = None) -> Path:
    """A dict-returning program whose out_spec's root names ``kind`` (and holds ``context``)."""
    saved = tmp_path / "pair.pt2"
    torch.export.save(torch.export.export(_Pair(), (torch.ones(2),)), saved)

    def edit(program: Any) -> None:
        signature = program["graph_module"]["module_call_graph"][0]["signature"]
        version, root = json.loads(signature["out_spec"])
        root.update({"type": kind} if context is None else {"type": kind, "context": context})
        signature["out_spec"] = json.dumps([version, root])

    return A.edit_archive(
        saved, tmp_path / f"{kind}.pt2", lambda e: A.edit_json(e, "models/model.json", edit)
    )


@pytest.fixture
def sandboxed_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What load_validated_programs sets in its process, taken back after the test."""
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", raising=False)


@pytest.mark.usefixtures("sandboxed_env")
def test_a_hostile_type_name_is_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"  # what importing the module the archive names would write
    module = tmp_path / "modules" / f"{HOSTILE_MODULE}.py"
    module.parent.mkdir()
    module.write_text(f"open({str(marker)!r}, 'w').write('imported')\nclass Evil(dict): pass\n")
    monkeypatch.syspath_prepend(str(module.parent))
    archive = _pair_archive(tmp_path, f"{HOSTILE_MODULE}.Evil")
    for program in (load_program_file(archive), load_validated_programs(archive)["model"]):
        assert program.call_spec.out_spec.type is dict
        outputs = program.module()(torch.ones(2))
        assert list(outputs) == ["doubled", "shifted"]
    assert not marker.exists()
    assert HOSTILE_MODULE not in sys.modules


@pytest.mark.usefixtures("sandboxed_env")
def test_the_sandbox_refuses_an_unreadable_type_in_one_line(tmp_path: Path) -> None:
    archive = _pair_archive(tmp_path, "somelib.Special", '{"doubled": 1}')
    with pytest.raises(UnsafeArchiveError) as refused:
        load_validated_programs(archive)
    assert refused.value.reason == "invalid_program"
    assert refused.value.message.startswith("the program's outputs are a somelib.Special,")


def test_the_local_cli_refuses_an_unreadable_type_in_one_line(tmp_path: Path) -> None:
    archive = _pair_archive(tmp_path, "somelib.Special", '{"doubled": 1}')
    with pytest.raises(ProgramInputError) as refused:
        load_program_file(archive, "forward")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"method 'forward': {archive}: the program's outputs are a somelib")
    assert message.endswith("export with return_dict=False, or return a tuple or a dict of tensors")
