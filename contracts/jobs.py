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

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from pteforge.contracts.errors import ErrorCode
from pteforge.contracts.json_types import JsonObject
from pteforge.contracts.specs import MethodSignature

COMPILE_KIND = "compile"
"""The ``kind`` of a compile job row."""


class _Contract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CompilePayload(_Contract):
    """What a queued compile job holds: the program, its canonical plan and the plan's hash
    (the dedupe key of the compiled artifact)."""

    program_id: str
    plan: JsonObject
    plan_hash: str


class LoweringRequest(_Contract):
    """What one lowering process does: read ``program_path``, apply ``plan``, write ``.pte``."""

    program_path: str
    plan: JsonObject
    output_path: str
    memory_limit_bytes: int | None = None


class LoweringResult(_Contract):
    """What a lowering that succeeded reports: the manager's report, the methods' specs and
    the numerics check of the written ``.pte``."""

    report: JsonObject
    methods: tuple[MethodSignature, ...]
    numerics: JsonObject | None = None


class JobError(_Contract):
    """Why a job failed: a stable ``/v1`` error code and a message for people."""

    code: ErrorCode
    message: str


class StageMessage(_Contract):
    """The child entered a new stage (``to_edge``, ``emit``, ``verify``, ...)."""

    kind: Literal["stage"] = "stage"
    stage: str


class ResultMessage(_Contract):
    """The child's last message when the lowering succeeded."""

    kind: Literal["result"] = "result"
    result: LoweringResult


class ErrorMessage(_Contract):
    """The child's last message when the lowering failed."""

    kind: Literal["error"] = "error"
    error: JobError


ChildMessage = Annotated[StageMessage | ResultMessage | ErrorMessage, Field(discriminator="kind")]
"""Any message a lowering child sends its worker."""

CHILD_MESSAGE: TypeAdapter[ChildMessage] = TypeAdapter(ChildMessage)
"""Parses (``validate_json``) and writes (``dump_json``) :data:`ChildMessage`."""
