"""The compile job's payload and the messages between a compile worker and its lowering child.

The payload is stored as JSON in the job row; the messages travel as JSON over a pipe private
to the two processes (never pickles: the child reads untrusted programs). Both ends parse
with ``model_validate`` and write with ``model_dump(mode="json")``, so nothing untyped
crosses the boundary and an unexpected key is refused rather than ignored.

Over the pipe, the worker sends one :class:`LoweringRequest`; the child answers with any
number of :class:`StageMessage` and then exactly one :class:`ResultMessage` or
:class:`ErrorMessage` (see :data:`CHILD_MESSAGE`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from pteforge.contracts.errors import ErrorCode
from pteforge.contracts.json_types import Contract, JsonObject
from pteforge.contracts.specs import MethodSignature

COMPILE_KIND = "compile"
"""The ``kind`` of a compile job row."""

PROFILE_KIND = "profile"
"""The ``kind`` of a profile job row (``POST /v1/profile-jobs``)."""

MAX_PROFILE_ITERATIONS = 1000
"""The most timed executions one profile job may ask for."""


class CompilePayload(Contract):
    """What a queued compile job holds: the program, its canonical plan and the plan's hash
    (the dedupe key of the compiled artifact)."""

    program_id: str
    plan: JsonObject
    plan_hash: str


class LoweringRequest(Contract):
    """What one lowering process does: read ``program_path``, apply ``plan``, write ``.pte``."""

    program_path: str
    plan: JsonObject
    output_path: str
    memory_limit_bytes: int | None = None
    bundle_path: str | None = None  # where to write the BundledProgram (.bpte), if anywhere


class ProfilePayload(Contract):
    """What a queued profile job holds: the artifact and method, how many timed runs, and
    the inputs as ``/v2`` JSON tensors (None: the artifact's numerics-check inputs)."""

    artifact_id: str
    method: str
    iterations: int = Field(ge=1, le=MAX_PROFILE_ITERATIONS)
    inputs: list[JsonObject] | None = None


class ProfileRequest(Contract):
    """What one profiling process does: load the ``.pte`` at ``pte_path`` (cold, then warm),
    run ``method`` once to warm up and ``iterations`` times timed, with ETDump on. Inputs:
    ``inputs`` (``/v2`` JSON tensors checked against ``signature``), or the numerics-check
    inputs of the program archive at ``program_path``."""

    kind: Literal["profile"] = "profile"
    pte_path: str
    method: str
    signature: MethodSignature
    iterations: int = Field(ge=1, le=MAX_PROFILE_ITERATIONS)
    inputs: list[JsonObject] | None = None
    program_path: str | None = None
    memory_limit_bytes: int | None = None


class LatencySummary(Contract):
    """Wall time of each timed execution (µs), and its order statistics."""

    min: float
    p50: float
    p90: float
    max: float
    samples: list[float]


class LoadTimes(Contract):
    """Program and method load (ms): first in a fresh process, then again in the same one."""

    cold: float
    warm: float


class OperatorTime(Contract):
    """One operator (or delegate call) summed over the profile's ``operator_runs`` traced
    runs; ``backend``: the delegate's backend id, or ``portable``; ``share``: of all rows'
    time."""

    name: str
    backend: str
    calls: int
    total_us: float
    share: float


class ProfileReport(Contract):
    """The result of a profile job (``GET /v1/jobs/{id}/profile``); operators sorted by
    ``total_us``, largest first. ``peak_memory_bytes``: the profiling process's peak
    resident memory growth over loading and running the method. ``operator_runs``: how many
    runs, traced with ETDump after a traced warm-up, the operator rows sum over (0 in a
    profile made before it was reported)."""

    artifact_id: str
    method: str
    iterations: int
    latency_us: LatencySummary
    load_ms: LoadTimes
    peak_memory_bytes: int
    operators: list[OperatorTime]
    operator_runs: int = 0


class LoweringResult(Contract):
    """What a lowering that succeeded reports: the manager's report, the methods' specs and
    the numerics check of the written ``.pte``."""

    report: JsonObject
    methods: tuple[MethodSignature, ...]
    numerics: JsonObject | None = None
    bundled: bool = False  # a BundledProgram was written to the request's ``bundle_path``


class JobError(Contract):
    """Why a job failed: a stable ``/v1`` error code and a message for people."""

    code: ErrorCode
    message: str


class StageMessage(Contract):
    """The child entered a new stage (``to_edge``, ``emit``, ``verify``, ...)."""

    kind: Literal["stage"] = "stage"
    stage: str


class ResultMessage(Contract):
    """The child's last message when the lowering succeeded."""

    kind: Literal["result"] = "result"
    result: LoweringResult


class ProfileMessage(Contract):
    """The child's last message when the profiling succeeded (``artifact_id`` left empty:
    the worker knows it)."""

    kind: Literal["profiled"] = "profiled"
    profile: ProfileReport


class ErrorMessage(Contract):
    """The child's last message when the lowering failed."""

    kind: Literal["error"] = "error"
    error: JobError


ChildMessage = Annotated[
    StageMessage | ResultMessage | ProfileMessage | ErrorMessage, Field(discriminator="kind")
]
"""Any message a lowering child sends its worker."""

ChildRequest = LoweringRequest | ProfileRequest
"""What a worker asks of a lowering child (a ``ProfileRequest`` says ``kind``)."""

CHILD_MESSAGE: TypeAdapter[ChildMessage] = TypeAdapter(ChildMessage)
"""Parses (``validate_json``) and writes (``dump_json``) :data:`ChildMessage`."""
