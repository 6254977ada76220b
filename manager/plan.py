"""Lowering plans (API.md section 2): which catalog target each method is lowered to.

``{"methods": {METHOD: TARGET}, "all": TARGET}``; a method entry overrides ``all``. TARGET is
``{"partitioners": [NAME | {"name", "options"}]}``, ``{"delegate": {"backend_id",
"compile_specs": [{"key", "value_b64"}]}}`` or ``{}``, optionally with ``"quantize": RECIPE``
and ``"calibration"``: a list of input tuples, each tensor ``{"dtype", "shape", "data"}``.

Program-wide options (``pteforge.backends.catalog.PLAN_OPTIONS``): ``"share_mutable_buffers":
true`` and ``"verify": {"rtol": float, "min_sqnr_db": float}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import torch

from pteforge.backends.catalog import DEFAULT_VERIFY_MIN_SQNR_DB, DEFAULT_VERIFY_RTOL
from pteforge.manager.errors import PlanError, UnknownMethodError

_TARGET_KEYS = {"partitioners", "delegate", "quantize", "calibration"}
_PLAN_KEYS = {"methods", "all", "share_mutable_buffers", "verify"}
_VERIFY_KEYS = {"rtol", "min_sqnr_db"}
Calibration = tuple[tuple[torch.Tensor, ...], ...]


@dataclass(frozen=True)
class PartitionerRef:
    """A catalog partitioner entry by name, with its (unvalidated) options."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """How one method is lowered; empty means portable operators only."""

    partitioners: tuple[PartitionerRef, ...] = ()
    delegate: Mapping[str, Any] | None = None
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
    def parse(cls, obj: Any) -> Plan:
        """Parse the JSON plan ``obj``; a bad field raises ``PlanError`` naming it."""
        if obj is None:
            return cls()
        _require_fields("plan", obj, _PLAN_KEYS, "", "a plan")
        methods = obj.get("methods")
        methods = {} if methods is None else methods
        _require_object("methods", methods)
        parsed = {str(m): _target(f"methods.{m}", t) for m, t in methods.items()}
        everything = _target("all", obj["all"]) if obj.get("all") is not None else None
        share = obj.get("share_mutable_buffers", False)
        if not isinstance(share, bool):
            raise PlanError("share_mutable_buffers", "must be true or false")
        verify = _verify(obj.get("verify"))
        return cls(methods=parsed, all=everything, share_mutable_buffers=share, verify=verify)

    def resolve(self, methods: Sequence[str]) -> dict[str, Target]:
        """The target of every method of a program; plan methods it lacks raise."""
        for method in self.methods:
            if method not in methods:
                raise UnknownMethodError(method, methods, field=f"methods.{method}")
        default = self.all or Target()
        return {m: self.methods.get(m, default) for m in methods}


def _require_object(name: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise PlanError(name, f"must be an object, not {type(value).__name__}")


def _require_fields(name: str, value: Any, known: Set[str], prefix: str, owner: str) -> None:
    """``value`` is an object with only ``known`` keys; the first other one is named as
    ``prefix + key`` ("unknown field; ``owner`` has ...")."""
    _require_object(name, value)
    unknown = set(value) - known
    if unknown:
        keys = ", ".join(sorted(known))
        raise PlanError(f"{prefix}{sorted(unknown)[0]}", f"unknown field; {owner} has {keys}")


def _verify(obj: Any) -> VerifySettings:
    if obj is None:
        return VerifySettings()
    _require_fields("verify", obj, _VERIFY_KEYS, "verify.", "verify")
    values = {}
    for key, value in obj.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PlanError(f"verify.{key}", "must be a number")
        if not math.isfinite(value):
            raise PlanError(f"verify.{key}", "must be a finite number")
        values[key] = float(value)
    if values.get("rtol", DEFAULT_VERIFY_RTOL) <= 0:
        raise PlanError("verify.rtol", "must be greater than 0")
    return VerifySettings(**values)


def _target(name: str, obj: Any) -> Target:
    _require_fields(name, obj, _TARGET_KEYS, f"{name}.", "a target")
    if "partitioners" in obj and "delegate" in obj:
        raise PlanError(name, "give either 'partitioners' or 'delegate', not both")
    quantize = obj.get("quantize")
    if quantize is not None and not (isinstance(quantize, str) and quantize):
        raise PlanError(f"{name}.quantize", "must be a recipe name")
    return Target(
        partitioners=_partitioners(f"{name}.partitioners", obj.get("partitioners", [])),
        delegate=_delegate(f"{name}.delegate", obj.get("delegate")),
        quantize=quantize,
        calibration=_calibration(f"{name}.calibration", obj.get("calibration")),
    )


def _partitioners(name: str, obj: Any) -> tuple[PartitionerRef, ...]:
    if not isinstance(obj, list):
        raise PlanError(name, "must be a list of catalog partitioner names or objects")
    refs = []
    for index, item in enumerate(obj):
        where = f"{name}[{index}]"
        if isinstance(item, str) and item:
            refs.append(PartitionerRef(item))
            continue
        _require_object(where, item)
        if set(item) - {"name", "options"} or not isinstance(item.get("name"), str):
            raise PlanError(where, "must be a name or {'name': str, 'options': {...}}")
        options = item.get("options") or {}
        _require_object(f"{where}.options", options)
        refs.append(PartitionerRef(item["name"], dict(options)))
    return tuple(refs)


def _delegate(name: str, obj: Any) -> Mapping[str, Any] | None:
    if obj is None:
        return None
    _require_object(name, obj)
    if not isinstance(obj.get("backend_id"), str) or not obj["backend_id"]:
        raise PlanError(f"{name}.backend_id", "must be a backend id such as 'XnnpackBackend'")
    specs = obj.get("compile_specs", [])
    if not isinstance(specs, list) or not all(isinstance(s, Mapping) for s in specs):
        raise PlanError(f"{name}.compile_specs", "must be a list of {'key', 'value_b64'}")
    return dict(obj)


def _calibration(name: str, obj: Any) -> Calibration | None:
    if obj is None:
        return None
    if not isinstance(obj, list) or not obj:
        raise PlanError(name, "must be a non-empty list of input lists")
    samples = []
    for index, sample in enumerate(obj):
        if not isinstance(sample, list):
            raise PlanError(f"{name}[{index}]", "must be a list of tensors")
        samples.append(tuple(_tensor(f"{name}[{index}][{i}]", t) for i, t in enumerate(sample)))
    return tuple(samples)


def _tensor(name: str, obj: Any) -> torch.Tensor:
    _require_object(name, obj)
    dtype = getattr(torch, str(obj.get("dtype", "float32")), None)
    if not isinstance(dtype, torch.dtype):
        raise PlanError(f"{name}.dtype", f"unknown dtype {obj.get('dtype')!r}")
    shape = obj.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise PlanError(f"{name}.shape", "must be a list of non-negative integers")
    try:
        return torch.tensor(obj.get("data"), dtype=dtype).reshape(shape)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise PlanError(f"{name}.data", f"does not hold a {shape} {dtype} tensor: {exc}") from None
