"""Typed results of the client: frozen dataclasses parsed from the service's JSON.

Each keeps the JSON it came from in ``raw`` (fields a newer server adds stay reachable).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from pteforge.contracts.specs import MethodSignature as MethodSignature  # re-exported
from pteforge.contracts.specs import TensorSpec as TensorSpec  # re-exported by the client
from pteforge.contracts.specs import methods_from_json

TERMINAL_STATUSES = frozenset({"succeeded", "failed", "canceled"})


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


@dataclass(frozen=True)
class _Stored:
    """What a program and an artifact have alike: stored content (its digest and size)
    holding methods; ``raw`` is the JSON it came from."""

    id: str
    sha256: str
    size_bytes: int
    methods: tuple[MethodSignature, ...]
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)


def _stored_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The :class:`_Stored` fields of a program's or artifact's JSON."""
    return {
        "id": str(obj["id"]),
        "sha256": str(obj["sha256"]),
        "size_bytes": int(obj.get("size_bytes", 0)),
        "methods": methods_from_json(obj.get("methods", ())),
        "created_at": _time(obj.get("created_at")),
        "raw": obj,
    }


@dataclass(frozen=True)
class Program(_Stored):
    """An uploaded program (``POST /v1/programs``)."""

    name: str

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Program:
        return cls(name=str(obj.get("name", "")), **_stored_fields(obj))


@dataclass(frozen=True)
class JobError:
    """Why a job failed: a stable ``code`` and a message."""

    code: str
    message: str


@dataclass(frozen=True)
class Job:
    """A compile job as the service showed it (an event carries the job as it was then)."""

    id: str
    kind: str
    status: str
    stage: str | None
    error: JobError | None
    artifact_id: str | None
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    changed_at: datetime | None  # when the job reached this status and stage
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Job:
        error = obj.get("error")
        return cls(
            id=str(obj["id"]),
            kind=str(obj.get("kind", "")),
            status=str(obj["status"]),
            stage=obj.get("stage"),
            error=JobError(str(error["code"]), str(error["message"])) if error else None,
            artifact_id=obj.get("artifact_id"),
            created_at=_time(obj.get("created_at")),
            started_at=_time(obj.get("started_at")),
            finished_at=_time(obj.get("finished_at")),
            changed_at=_time(obj.get("changed_at")),
            raw=obj,
        )

    @property
    def done(self) -> bool:
        """Whether the job ended (succeeded, failed or canceled)."""
        return self.status in TERMINAL_STATUSES

    def __str__(self) -> str:
        stage = f" ({self.stage})" if self.stage else ""
        return f"job {self.id}: {self.status}{stage}"


def judged_worst(check: dict[str, Any]) -> tuple[str, float | None]:
    """The metric a method's numerics record is judged on (``max_rel_error``, or
    ``sqnr_db`` for a quantized method) and its worst output's value: None when some
    output's is null (not finite, or an exact match's SQNR) or there is no output."""
    metric = str((check.get("check") or {}).get("metric", "max_rel_error"))
    values = [o.get(metric) for o in check.get("outputs") or [] if isinstance(o, dict)]
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    if len(numbers) < len(values) or not numbers:
        return metric, None
    return metric, min(numbers) if metric == "sqnr_db" else max(numbers)


def _worst_error(check: dict[str, Any]) -> str:
    """``max_rel_error 0.0031 > limit 0.001`` (or ``sqnr_db 12.5 < limit 20``): the worst
    output of a method's numerics record against its limit."""
    limit = (check.get("check") or {}).get("limit")
    metric, worst = judged_worst(check)
    if worst is None:
        return f"{metric} not finite (limit {limit})"
    return f"{metric} {worst:.3g} {'<' if metric == 'sqnr_db' else '>'} limit {limit}"


@dataclass(frozen=True)
class Artifact(_Stored):
    """A compiled ``.pte``: its digest, plan, methods, the lowering report and the numerics
    check against the exported program (None where the server ran none)."""

    program_id: str | None
    plan: dict[str, Any]
    report: dict[str, Any]
    numerics: dict[str, Any] | None
    data: dict[str, Any] | None = None
    """The ``.ptd`` holding the constants the ``.pte`` keeps outside (``sha256``,
    ``size_bytes``), or None for a self-contained ``.pte``."""

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Artifact:
        return cls(
            program_id=obj.get("program_id"),
            plan=dict(obj.get("plan") or {}),
            report=dict(obj.get("report") or {}),
            numerics=obj.get("numerics"),
            data=obj.get("data"),
            **_stored_fields(obj),
        )

    def sha256_of(self, part: str) -> str | None:
        """The sha256 of the file ``part`` names (``pte``, ``ptd``), None for ``bpte``."""
        if part == "pte":
            return self.sha256
        return str(self.data["sha256"]) if part == "ptd" and self.data else None

    def method(self, name: str) -> MethodSignature | None:
        """The method called ``name``, or None."""
        return next((m for m in self.methods if m.name == name), None)

    def numerics_failures(self) -> list[str]:
        """One sentence per method whose numerics check failed though the artifact was kept:
        over its tolerance (the measured error and the limit), unable to run in the native
        runtime at all (status ``error``: what the runtime said), or passed against
        reference outputs that were all zero (a check that compared nothing)."""
        methods = (self.numerics or {}).get("methods") or {}
        kept = "(the artifact is kept: check its outputs before use)"
        failures = []
        for name, check in methods.items():
            status = check.get("status") if isinstance(check, dict) else None
            if status == "over_tolerance":
                problem = f"is over its numerics tolerance: {_worst_error(check)}"
            elif status == "error":
                said = " ".join(str(check.get("message")).split())  # one line, log included
                problem = f"failed to run in the numerics check: {said}"
            elif status == "passed" and check.get("message"):
                problem = f"passed its numerics check, but {check['message']}"
            else:
                continue
            failures.append(f"artifact {self.id}: method {name!r} {problem} {kept}")
        return failures


@dataclass(frozen=True)
class ModelVersion:
    """One version of a model: the artifact it serves (``POST /v1/models/{name}/versions``)."""

    name: str
    version: int
    artifact_id: str
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: dict[str, Any], name: str | None = None) -> ModelVersion:
        return cls(
            name=str(obj.get("name", name or "")),
            version=int(obj["version"]),
            artifact_id=str(obj["artifact_id"]),
            created_at=_time(obj.get("created_at")),
            raw=obj,
        )


@dataclass(frozen=True)
class Model:
    """A model name: ``latest_version`` is what ``infer(name, ...)`` runs (None once every
    version was deleted); ``versions`` (oldest first) only from ``get_model``."""

    name: str
    owned_by: str
    created: int
    latest_version: int | None
    versions: tuple[ModelVersion, ...]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Model:
        name = str(obj["id"])
        latest = obj.get("latest_version")
        return cls(
            name=name,
            owned_by=str(obj.get("owned_by", "")),
            created=int(obj.get("created", 0)),
            latest_version=None if latest is None else int(latest),
            versions=tuple(ModelVersion.from_json(v, name) for v in obj.get("versions", ())),
            raw=obj,
        )


@dataclass(frozen=True)
class InferResult:
    """The outputs of one ``/v2`` call, by name in the method's order; indexable by position
    or name and iterable over the arrays (``y, = client.infer(...)``). ``parameters`` holds
    the server's timings (``queue_ms``, ``execute_ms``, ...). ``version`` is the model version
    that answered (a model name's latest, or the one asked for; ``"1"`` for an artifact)."""

    model: str
    outputs: dict[str, np.ndarray]
    parameters: dict[str, Any]
    version: str = "1"

    def __getitem__(self, key: int | str) -> np.ndarray:
        if isinstance(key, int):
            return list(self.outputs.values())[key]
        return self.outputs[key]

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.outputs.values())

    def __len__(self) -> int:
        return len(self.outputs)
