"""The operator allowlist is torch's own registry minus a reasoned denylist.

No spelling rule refuses a real operator; every refusal names the operator and says why.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pteforge.server.sandbox import UnsafeArchiveError, validate_pt2_archive
from pteforge.server.sandbox import operators as ops
from pteforge.server.sandbox.operators import Registry, refusal, registry

from . import archives as A
from .conftest import ValidArchives

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_registry_file_matches_the_installed_torch(tmp_path: Path) -> None:
    """Regenerated in a fresh interpreter (so nothing this test process imported counts)."""
    output = tmp_path / "operators.json"
    subprocess.run(
        [sys.executable, "-m", "pteforge.server.sandbox.operators_torch", "--output", str(output)],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    installed = Registry.from_json(json.loads(output.read_text()))
    shipped = registry()
    added = sorted(installed.operators - shipped.operators)
    removed = sorted(shipped.operators - installed.operators)
    assert (added, removed) == ([], []), (
        f"torch {installed.torch_version} registers {len(added)} operators the shipped registry "
        f"lacks ({added[:20]}) and lacks {len(removed)} ({removed[:20]}): review them for the "
        "denylist, then run python -m pteforge.server.sandbox.operators_torch"
    )
    assert installed.torch_version == shipped.torch_version


def _packets(names: frozenset[str]) -> set[str]:
    return {name.rpartition(".")[0] for name in names} | set(names)


def test_every_denied_name_is_a_registered_operator() -> None:
    """A misspelled denylist entry would deny nothing; each must match a real operator."""
    packets = _packets(registry().operators)
    assert sorted(set(ops.DENIED) - packets) == []


def test_reviewed_higher_order_operators_exist() -> None:
    registered = {f"{ops.OPS_PREFIX}{ops.HIGHER_ORDER}.{name}" for name in ops.SAFE_HIGHER_ORDER}
    assert sorted(registered - registry().operators) == []
    assert sorted(registered & set(ops.DENIED)) == []


def test_symbolic_functions_cover_what_the_serializer_writes() -> None:
    from torch._export.serde.serialize import _SYM_OPS

    written = {f"{fn.__module__}.{fn.__name__}" for fn in _SYM_OPS}
    assert sorted(written - ops.SYMBOLIC_FUNCTIONS) == []
    for name in ops.SYMBOLIC_FUNCTIONS:  # each resolves to a function, as the loader does it
        module, _, attribute = name.partition(".")
        assert callable(getattr(importlib.import_module(module), attribute)), name


def test_every_registered_overload_is_accepted_unless_denied() -> None:
    refused = {name: refusal(name) for name in registry().operators}
    refused = {name: why for name, why in refused.items() if why}
    assert all(why.startswith("denied") or "reviewed" in why for why in refused.values())
    accepted = len(registry().operators) - len(refused)
    assert accepted > 3000  # aten alone registers over 3000 overloads
    for name in ("__and__.Tensor", "__or__.Tensor", "__lshift__.Scalar", "__rshift__.Tensor"):
        assert refusal(f"torch.ops.aten.{name}") is None


REFUSALS = {
    "torch.ops.aten.from_file.default": "denied: reads a file",
    "torch.ops.aten.set_.source_Storage": "denied: points a tensor at another storage",
    "torch.ops.aten._reshape_alias.default": "denied: makes a view without checking",
    "torch.ops.higher_order.aoti_call_delegate": "denied: runs an AOTInductor",
    "torch.ops.higher_order.tag_activation_checkpoint": "a higher-order operator that has not",
    "torch.ops.aten.not_a_real_op.default": "not an operator overload registered by the installed",
    "torch.ops.aten.__class__": "not an operator overload registered by the installed",
    "torch.ops.aten.add": "not an operator overload registered by the installed",
    "torch.ops.os.system": "namespace 'os' is not accepted",
    "torch.ops.c10d_functional.broadcast.default": "namespace 'c10d_functional' is not accepted",
    "torch.load": "not a torch operator",
    "#evil:op": "not a torch operator",
    "builtins.exec": "not a torch operator",
}


@pytest.mark.parametrize("target", sorted(REFUSALS))
def test_refusals_name_the_operator_and_the_reason(
    target: str, valid_archives: ValidArchives, tmp_path: Path
) -> None:
    path = A.edit_archive(valid_archives.single, tmp_path / "a.pt2", A.operator_edit(target))
    with pytest.raises(UnsafeArchiveError) as info:
        validate_pt2_archive(path)
    assert info.value.reason == "unsafe_operator"
    assert f"operator {target!r} is not allowed: {REFUSALS[target]}" in info.value.message
    assert info.value.message.startswith("models/model.json: ")


def test_operator_arguments_are_checked_too(valid_archives: ValidArchives, tmp_path: Path) -> None:
    """A higher-order operator's ``as_operator`` argument is held to the same policy."""

    def inject(entries: A.Entries) -> None:
        def edit(doc: Any) -> None:
            node = doc["graph_module"]["graph"]["nodes"][0]
            node["target"] = "torch.ops.higher_order.auto_functionalized"
            operator = {"as_operator": "torch.ops.aten.set_.source_Storage"}
            node["inputs"].insert(0, {"name": "_op", "arg": operator})

        A.edit_json(entries, f"models/{A.model_name(entries)}.json", edit)

    path = A.edit_archive(valid_archives.single, tmp_path / "a.pt2", inject)
    with pytest.raises(UnsafeArchiveError, match=r"set_\.source_Storage' is not allowed: denied"):
        validate_pt2_archive(path)
