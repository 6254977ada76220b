"""What the manager derives from a lowering plan; the plan itself is one typed model,
:class:`pteforge.contracts.plan.PlanSpec` (format: docs/http-api.md), taken as it is.

:func:`parse_plan` validates a plan's JSON into a :class:`PlanSpec`, a bad field raising
``PlanError`` naming it as written; :func:`resolve_targets` gives each method of a program its
target; :func:`calibration_tensors` turns a target's calibration data into torch tensors (in
the lowering child), :func:`check_calibration` checks it can without torch (in the server).
What needs the catalog or the program is checked by :mod:`pteforge.manager.plan_check`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from pydantic import ValidationError

from pteforge.contracts.plan import CalibrationTensor, PlanSpec, TargetSpec
from pteforge.contracts.plan_problems import plan_problem
from pteforge.manager.errors import PlanError, UnknownMethodError

if TYPE_CHECKING:  # the server checks plans without torch, calibration data too
    import torch

Calibration: TypeAlias = "tuple[tuple[torch.Tensor, ...], ...]"


def parse_plan(obj: PlanSpec | object) -> PlanSpec:
    """The plan of ``obj``: a :class:`PlanSpec` as it is, or its JSON form (None: the empty
    plan); a bad field raises ``PlanError`` naming it as written."""
    if obj is None:
        return PlanSpec()
    if isinstance(obj, PlanSpec):
        return obj
    try:
        return PlanSpec.model_validate(obj)
    except ValidationError as exc:
        problem = plan_problem(exc.errors())
        assert problem is not None  # every error of validating a PlanSpec is in it
        raise PlanError(problem.field, problem.message) from None


def resolve_targets(plan: PlanSpec, methods: Sequence[str]) -> dict[str, TargetSpec]:
    """The target of every method of a program; plan methods it lacks raise."""
    for method in plan.methods or {}:
        if method not in methods:
            raise UnknownMethodError(method, methods, field=f"methods.{method}")
    return {m: plan.target_of(m) for m in methods}


def calibration_tensors(where: str, target: TargetSpec) -> Calibration | None:
    """The calibration samples of ``target`` (written at ``where``, e.g. ``all``) as tensors,
    or None when it gives none; a tensor that cannot be built raises ``PlanError``."""
    if target.calibration is None:
        return None
    name = f"{where}.calibration"
    return tuple(
        tuple(_tensor(f"{name}[{index}][{i}]", t) for i, t in enumerate(sample))
        for index, sample in enumerate(target.calibration)
    )


def _tensor(name: str, spec: CalibrationTensor) -> torch.Tensor:
    import torch

    dtype = getattr(torch, spec.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise PlanError(f"{name}.dtype", f"unknown dtype {spec.dtype!r}")
    try:
        return torch.tensor(spec.data, dtype=dtype).reshape(spec.shape)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise PlanError(
            f"{name}.data", f"does not hold a {spec.shape} {dtype} tensor: {exc}"
        ) from None


_INTEGER_BITS = {"int8": 8, "int16": 16, "short": 16, "int32": 32, "int": 32}
CALIBRATION_DTYPES = frozenset(
    {"bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"}
    | {"float16", "bfloat16", "float32", "float64", "half", "float", "double", "short"}
    | {"int", "long"}
)
"""The torch dtype names a calibration tensor may have (``torch.<name>`` is a dtype)."""


def check_calibration(where: str, target: TargetSpec) -> None:
    """Raise ``PlanError`` for the first calibration tensor of ``target`` that
    :func:`calibration_tensors` could not build, without torch: the server checks uploaded
    plans with the standard library only (the lowering child builds the tensors). Its dtype
    must be one of :data:`CALIBRATION_DTYPES`; its data a number or regular nested lists of
    numbers, as many as its shape holds, each integer within the signed range of the dtype's
    width (int64's for the unsigned and floating ones)."""
    for index, sample in enumerate(target.calibration or ()):
        for i, spec in enumerate(sample):
            name = f"{where}.calibration[{index}][{i}]"
            if spec.dtype not in CALIBRATION_DTYPES:
                raise PlanError(f"{name}.dtype", f"unknown dtype {spec.dtype!r}")
            problem = _data_problem(spec)
            if problem is not None:
                message = f"does not hold a {spec.shape} {spec.dtype} tensor: {problem}"
                raise PlanError(f"{name}.data", message)


def _data_problem(spec: CalibrationTensor) -> str | None:
    """Why ``spec.data`` is not a tensor of ``spec.shape``, or None; level by level (no
    recursion, whatever the nesting)."""
    level, count = [spec.data], 1
    while any(isinstance(item, list) for item in level):
        if not all(isinstance(item, list) for item in level):
            return "it mixes lists and numbers at one depth"
        lengths = {len(item) for item in level}  # type: ignore[arg-type]
        if len(lengths) > 1:
            return f"its lists at one depth have different lengths {sorted(lengths)[:4]}"
        count *= lengths.pop()
        level = [value for item in level for value in item]  # type: ignore[union-attr]
    if count != math.prod(spec.shape):
        return f"it holds {count} values, not {math.prod(spec.shape)}"
    return next((p for p in map(_number_problem(spec.dtype), level) if p), None)


def _number_problem(dtype: str) -> Callable[[object], str | None]:
    bits = _INTEGER_BITS.get(dtype, 64)

    def problem(value: object) -> str | None:
        if not isinstance(value, int | float):  # bool is an int
            return f"{str(value)[:40]!r} is not a number"
        if isinstance(value, int) and not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            return f"{value} does not fit in {dtype}"
        return None

    return problem
