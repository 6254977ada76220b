"""A plan's calibration data is checked without torch (red-team pass): the server checks every
submitted plan (``check_plan``), and building the tensors there loaded libtorch into the HTTP
process for the first calibrated plan (its RSS 160 -> 476 MB, 2 s), and a ``dtype`` of
``_inductor`` made ``getattr(torch, dtype)`` import ``torch._inductor`` there. The lowering
child still builds the tensors (``calibration_tensors``); the check must agree with it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import torch

from pteforge.backends import default_catalog
from pteforge.contracts.plan import PlanSpec, TargetSpec
from pteforge.manager.errors import PlanError
from pteforge.manager.plan import CALIBRATION_DTYPES, calibration_tensors, parse_plan
from pteforge.manager.plan_check import check_plan

_IN_A_FRESH_INTERPRETER = """
import sys
from pteforge.backends import default_catalog
from pteforge.backends import default_catalog
from pteforge.contracts.plan import PlanSpec, TargetSpec
from pteforge.manager.errors import PlanError
from pteforge.manager.plan import parse_plan
from pteforge.manager.plan_check import check_plan

for dtype in ("float32", "_inductor"):
    tensor = {"dtype": dtype, "shape": [1, 2], "data": [[1.0, 2.0]]}
    try:
        check_plan(parse_plan({"all": {"calibration": [[tensor]]}}), ["forward"], default_catalog())
    except PlanError:
        pass
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def test_checking_a_calibrated_plan_imports_no_torch() -> None:
    run = [sys.executable, "-c", _IN_A_FRESH_INTERPRETER]
    out = subprocess.run(run, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def _outcome(check: Any, tensor: dict[str, Any]) -> str | None:
    """The field ``check`` refuses for a plan calibrating with ``tensor`` (None: taken)."""
    target = parse_plan({"all": {"calibration": [[tensor]]}}).all
    try:
        check("all", target)
    except PlanError as exc:
        return exc.field
    return None


def _check_plan(where: str, target: TargetSpec) -> None:
    """What the server runs: the whole plan's check."""
    check_plan(PlanSpec(all=target), ["forward"], default_catalog())


@pytest.mark.parametrize(
    ("dtype", "shape", "data"),
    [
        ("float32", [1, 2], [1.0, 2.0]),
        ("float32", [1, 2], [[1.0], [2.0]]),
        ("float32", [], 3.0),
        ("float32", [2, 0], [[], []]),
        ("uint8", [1], [255]),
        ("bool", [2], [True, 2]),
        ("long", [1], [7]),
        ("int8", [1], [300]),
        ("int64", [1], [2**63]),
        ("float32", [3], [[1], [2, 3]]),
        ("float32", [2], [1, [2]]),
        ("float32", [1], ["x"]),
        ("float32", [1], [None]),
        ("float32", [1], {"a": 1}),
        ("float32", [3], [1, 2]),
        ("_inductor", [1], [1]),
    ],
)
def test_the_check_refuses_what_building_refuses(dtype: str, shape: list[int], data: Any) -> None:
    tensor = {"dtype": dtype, "shape": shape, "data": data}
    assert _outcome(_check_plan, tensor) == _outcome(calibration_tensors, tensor)


def test_every_calibration_dtype_is_a_torch_dtype() -> None:
    assert all(isinstance(getattr(torch, name), torch.dtype) for name in CALIBRATION_DTYPES)
