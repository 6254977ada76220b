"""JSON shapes of the job routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from pteforge.contracts.artifact_report import AS_WRITTEN
from pteforge.contracts.jobs import MAX_PROFILE_ITERATIONS
from pteforge.contracts.json_types import JsonObject
from pteforge.contracts.plan import PlanSpec
from pteforge.server.startup.toolchain import Toolchain, toolchain
from pteforge.storage.domain import Job, JobEvent


class CompileJobRequest(BaseModel):
    """``POST /v1/compile-jobs`` body."""

    program_id: str = Field(description="An uploaded program of the caller's project.")
    plan: PlanSpec = Field(
        description=(
            'Lowering plan: {"methods": {METHOD: TARGET}} and/or {"all": TARGET}; optionally '
            '"share_mutable_buffers": true, "verify": {"rtol": 1e-4, "min_sqnr_db": 20} and '
            '"constant_methods" (e.g. the LLM runner\'s {"get_max_seq_len": 128}). '
            "Unknown keys are refused; so are catalog names, backend ids, recipes and methods "
            "that do not exist (422 invalid_plan naming the field)."
        )
    )


class ProfileJobRequest(BaseModel):
    """``POST /v1/profile-jobs`` body."""

    model_config = ConfigDict(extra="forbid")

    artifact_id: str = Field(description="An artifact of the caller's project.")
    method: str = Field(description="The method to profile.")
    iterations: int = Field(
        default=20,
        ge=1,
        le=MAX_PROFILE_ITERATIONS,
        description="Timed executions after one warm-up run (1 to 1000).",
    )
    inputs: list[JsonObject] | None = Field(
        default=None,
        fail_fast=True,
        description=(
            "The method's inputs as /v2 JSON tensors ({name, datatype, shape, data}); "
            "default: the inputs of the artifact's numerics check."
        ),
    )


class JobError(BaseModel):
    code: str
    message: str


class JobOut(BaseModel):
    """A job as the API shows it."""

    id: str
    kind: str
    status: str
    stage: str | None
    error: JobError | None
    artifact_id: str | None
    created_at: datetime
    started_at: datetime | None = Field(description="When the current attempt started.")
    finished_at: datetime | None
    attempt: int = Field(description="Attempts started so far (0 while first queued).")
    retry_reason: str | None = Field(
        description=(
            "Why an earlier attempt was abandoned (its lowering process died, or its worker "
            "stopped or vanished), if one was."
        )
    )
    toolchain: Toolchain = Field(
        default_factory=toolchain, description="torch and executorch versions of this server."
    )
    program_id: str | None = Field(default=None, description="The program a compile job lowers.")
    plan: Annotated[PlanSpec | None, AS_WRITTEN] = Field(
        default=None,
        description="A compile job's plan as submitted, without parts that mean the same as "
        "leaving them out (as its artifact's plan).",
    )
    changed_at: datetime | None = Field(
        default=None,
        description="When this status or stage began: set on the events of the job's "
        "stream (GET /v1/jobs/{id}/events), null elsewhere.",
    )

    @classmethod
    def of(cls, job: Job) -> JobOut:
        error = None
        if job.error_code is not None:
            error = JobError(code=job.error_code, message=job.error_message or job.error_code)
        return cls(
            id=job.id,
            kind=job.kind,
            status=job.status.value,
            stage=job.stage,
            error=error,
            artifact_id=job.artifact_id,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            attempt=job.attempts,
            retry_reason=job.retry_reason,
            program_id=_payload_str(job, "program_id"),
            plan=_payload_plan(job),
        )

    @classmethod
    def at(cls, job: Job, event: JobEvent) -> JobOut:
        """The job as it was right after ``event``, of the attempt it belongs to: the
        fields its end sets (error, artifact, finish time) show only on the terminal event."""
        then = cls.of(job).model_copy(
            update={
                "status": event.status.value,
                "stage": event.stage,
                "attempt": event.attempt,
                "started_at": event.started_at,
                "retry_reason": event.retry_reason,
                "changed_at": event.at,
            }
        )
        if event.status.terminal:
            return then
        return then.model_copy(update={"error": None, "artifact_id": None, "finished_at": None})


def _payload_str(job: Job, key: str) -> str | None:
    value = job.payload.get(key)
    return value if isinstance(value, str) else None


def _payload_plan(job: Job) -> PlanSpec | None:
    """The plan a compile job holds; None for other kinds (or a payload no plan validates)."""
    plan = job.payload.get("plan")
    if not isinstance(plan, dict):
        return None
    try:
        return PlanSpec.model_validate(plan)
    except ValueError:
        return None


class JobList(BaseModel):
    """``GET /v1/jobs``: newest first."""

    jobs: list[JobOut]
