"""What an artifact carries besides its ``.pte``: the compile report and the numerics record,
as typed models, so ``GET /v1/artifacts`` declares their shape (no open ``dict`` crosses the
HTTP boundary).

The manager writes both as plain JSON (:func:`pteforge.manager.report.program_report`,
:func:`pteforge.manager.verify.verify_numerics`); storage keeps that JSON and the server
reads it back into these models. They keep keys they do not declare (``extra="allow"``):
stored documents outlive the code that wrote them, and reading an artifact stored by an
older or newer pteforge must neither fail nor drop part of its report.
Keys a document may leave out (an uploaded artifact's report has only ``source``, a method
that could not run has no ``outputs``) are optional here and dumped only when present:
:data:`AS_WRITTEN` serializes a stored document back to exactly the JSON it was read from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, WrapSerializer

from pteforge.contracts.plan import VerifySpec

__all__ = [
    "AS_WRITTEN",
    "BackendDelegation",
    "CompileReport",
    "ConstantsReport",
    "MethodNumerics",
    "MethodReport",
    "Numerics",
    "NumericsCheck",
    "OperatorDelegation",
    "OutputError",
    "method_backends",
]

# A lambda, not a def: without a return annotation the JSON schema stays the model's own.
AS_WRITTEN = WrapSerializer(
    lambda value, _handler, info: (
        None if value is None else value.model_dump(mode=info.mode, exclude_unset=True)
    )
)
"""Serialize a model read from stored JSON with only the keys that JSON had (nested too)."""


class StoredDocument(BaseModel):
    """A part of a stored document: undeclared keys kept as written, immutable."""

    model_config = ConfigDict(extra="allow", frozen=True)


class OperatorDelegation(StoredDocument):
    """How many nodes of one operator were delegated and how many were not."""

    delegated: int
    non_delegated: int


class BackendDelegation(StoredDocument):
    """What one backend id took of a method."""

    delegated_operators: int
    delegated_subgraphs: int


class MethodReport(StoredDocument):
    """Operator delegation of one method: totals, per backend id and per operator; and
    the bytes its memory plan allocates when loaded (absent from older reports)."""

    delegated_operators: int
    non_delegated_operators: int
    delegated_subgraphs: int
    backends: dict[str, BackendDelegation]
    operators: dict[str, OperatorDelegation]
    planned_memory_bytes: int | None = None


class ConstantsReport(StoredDocument):
    """Constant bytes over all methods, unique bytes, and bytes used by several methods."""

    constant_bytes: int
    unique_constant_bytes: int
    shared_constant_bytes: int


class CompileReport(StoredDocument):
    """``ProgramManager.report()`` of a compiled artifact (``methods`` and ``program``), or
    ``{"source": "upload"}`` for a ``.pte`` uploaded as is."""

    methods: dict[str, MethodReport] | None = None
    program: ConstantsReport | None = None
    source: Literal["upload"] | None = None


class NumericsCheck(StoredDocument):
    """The metric a method is judged on and its limit."""

    metric: Literal["max_rel_error", "sqnr_db"]
    limit: float


class OutputError(StoredDocument):
    """One output of the runtime against the exported program (null: not finite, or exact)."""

    name: str
    max_abs_error: float | None
    max_rel_error: float | None
    sqnr_db: float | None
    exact: bool
    within_tolerance: bool


Status = Literal["passed", "over_tolerance", "not_executable", "error"]


class MethodNumerics(StoredDocument):
    """The numerics record of one method; ``message`` says why it did not pass or run, or
    on one that passed, why the check says little (its reference outputs were all zero)."""

    check: NumericsCheck
    inputs: Literal["example", "generated"] | None = None
    outputs: list[OutputError] | None = None
    status: Status
    message: str | None = None


class Numerics(StoredDocument):
    """The numerics check of every method of an artifact (``pteforge.manager.verify``)."""

    status: Status
    flagged: bool
    tolerance: VerifySpec
    seconds: float
    methods: dict[str, MethodNumerics]


def unrunnable_reason(backends: Sequence[str]) -> str:
    """Why a method cannot run on this host: the backends it delegates to that its runtime
    does not register (the numerics check's ``not_executable``, ``/v2`` ready and infer,
    the repository index say it alike)."""
    return f"delegated to {', '.join(backends)}, which this host's runtime cannot execute"


def method_backends(report: Mapping[str, Any], method: str) -> set[str]:
    """The backend ids ``method`` delegates to, read from an artifact's stored report (none
    for an uploaded ``.pte``, whose report has no ``methods``)."""
    methods = report.get("methods")
    entry = methods.get(method) if isinstance(methods, Mapping) else None
    backends = entry.get("backends") if isinstance(entry, Mapping) else None
    return set(backends) if isinstance(backends, Mapping) else set()
