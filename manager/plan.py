"""Lowering plans (format: docs/http-api.md): which catalog target each method is lowered to.

The plan's JSON form and its rules are one typed model, :class:`pteforge.contracts.plan.PlanSpec`
(the service's request body uses it too, so OpenAPI shows it). :meth:`Plan.parse` validates
with it and builds the manager's :class:`Plan`: targets, calibration tensors and verify
tolerances; a bad field raises ``PlanError`` naming it as written. What needs the catalog or
the program is checked by :mod:`pteforge.manager.plan_check`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from pydantic import JsonValue, ValidationError

from pteforge.contracts.plan import (
    DEFAULT_VERIFY_MIN_SQNR_DB,
    DEFAULT_VERIFY_RTOL,
    CalibrationTensor,
    PartitionerSpec,
    PlanSpec,
    TargetSpec,
    VerifySpec,
)
from pteforge.contracts.plan_problems import plan_problem
from pteforge.manager.errors import PlanError, UnknownMethodError

Calibration = tuple[tuple[torch.Tensor, ...], ...]


@dataclass(frozen=True)
class PartitionerRef:
    """A catalog partitioner entry by name, with its (unvalidated) options."""

    name: str
    options: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """How one method is lowered; empty means portable operators only."""

    partitioners: tuple[PartitionerRef, ...] = ()
    delegate: Mapping[str, JsonValue] | None = None
    quantize: str | None = None
    calibration: Calibration | None = None

    @property
    def delegated(self) -> bool:
        return bool(self.partitioners) or self.delegate is not None


@dataclass(frozen=True)
class VerifySettings:
    """Tolerances of the numerics check (plan key ``verify``)."""

    rtol: float = DEFAULT_VERIFY_RTOL  # fp32 methods: max |a - b| / max |b|
    min_sqnr_db: float = DEFAULT_VERIFY_MIN_SQNR_DB  # quantized methods

    def to_json(self) -> dict[str, float]:
        return {"rtol": self.rtol, "min_sqnr_db": self.min_sqnr_db}


@dataclass(frozen=True)
class Plan:
    """A parsed plan; build it with :meth:`parse`."""

    methods: Mapping[str, Target] = field(default_factory=dict)
    all: Target | None = None
    share_mutable_buffers: bool = False
    verify: VerifySettings = field(default_factory=VerifySettings)

    @classmethod
    def parse(cls, obj: PlanSpec | object) -> Plan:
        """The plan of ``obj``: a :class:`PlanSpec`, or its JSON form (None: the empty plan);
        a bad field raises ``PlanError`` naming it as written."""
        if obj is None:
            return cls()
        spec = obj if isinstance(obj, PlanSpec) else _validated(obj)
        return cls(
            methods={m: _target(f"methods.{m}", t) for m, t in (spec.methods or {}).items()},
            all=None if spec.all is None else _target("all", spec.all),
            share_mutable_buffers=spec.share_mutable_buffers,
            verify=_verify(spec.verify),
        )

    def resolve(self, methods: Sequence[str]) -> dict[str, Target]:
        """The target of every method of a program; plan methods it lacks raise."""
        for method in self.methods:
            if method not in methods:
                raise UnknownMethodError(method, methods, field=f"methods.{method}")
        default = self.all or Target()
        return {m: self.methods.get(m, default) for m in methods}


def _validated(obj: object) -> PlanSpec:
    try:
        return PlanSpec.model_validate(obj)
    except ValidationError as exc:
        problem = plan_problem(exc.errors())
        assert problem is not None  # every error of validating a PlanSpec is in it
        raise PlanError(problem.field, problem.message) from None


def _verify(spec: VerifySpec | None) -> VerifySettings:
    if spec is None:
        return VerifySettings()
    return VerifySettings(rtol=spec.rtol, min_sqnr_db=spec.min_sqnr_db)


def _target(name: str, spec: TargetSpec) -> Target:
    delegate = spec.delegate
    return Target(
        partitioners=tuple(_partitioner(p) for p in spec.partitioners),
        delegate=None if delegate is None else delegate.model_dump(mode="json"),
        quantize=spec.quantize,
        calibration=_calibration(f"{name}.calibration", spec.calibration),
    )


def _partitioner(item: str | PartitionerSpec) -> PartitionerRef:
    if isinstance(item, str):
        return PartitionerRef(item)
    return PartitionerRef(item.name, dict(item.options or {}))


def _calibration(name: str, samples: list[list[CalibrationTensor]] | None) -> Calibration | None:
    if samples is None:
        return None
    return tuple(
        tuple(_tensor(f"{name}[{index}][{i}]", t) for i, t in enumerate(sample))
        for index, sample in enumerate(samples)
    )


def _tensor(name: str, spec: CalibrationTensor) -> torch.Tensor:
    dtype = getattr(torch, spec.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise PlanError(f"{name}.dtype", f"unknown dtype {spec.dtype!r}")
    try:
        return torch.tensor(spec.data, dtype=dtype).reshape(spec.shape)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise PlanError(
            f"{name}.data", f"does not hold a {spec.shape} {dtype} tensor: {exc}"
        ) from None
