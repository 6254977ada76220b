"""What the manager derives from a lowering plan; the plan itself is one typed model,
:class:`pteforge.contracts.plan.PlanSpec` (format: docs/http-api.md), taken as it is.

:func:`parse_plan` validates a plan's JSON into a :class:`PlanSpec`, a bad field raising
``PlanError`` naming it as written; :func:`resolve_targets` gives each method of a program its
target; :func:`calibration_tensors` turns a target's calibration data into torch tensors. What
needs the catalog or the program is checked by :mod:`pteforge.manager.plan_check`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from pydantic import ValidationError

from pteforge.contracts.plan import CalibrationTensor, PlanSpec, TargetSpec
from pteforge.contracts.plan_problems import plan_problem
from pteforge.manager.errors import PlanError, UnknownMethodError

if TYPE_CHECKING:  # the server checks plans without loading torch until a plan calibrates
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
