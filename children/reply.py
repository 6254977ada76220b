"""The one answer of a one-job child: its result, or why it refused, as typed JSON.

The child writes it with :meth:`ChildReply.to_bytes` (to a pipe, or as the last line of its
stdout); the parent reads it with :meth:`ChildReply.from_bytes`, which validates it like
the compile job's messages (:mod:`pteforge.contracts.jobs`): an unexpected key, a missing
result or anything that is not this shape reads as no reply at all.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from pteforge.contracts.json_types import JsonObject, plain_json


class ChildReply(BaseModel):
    """``ok`` with the job's ``result``, or not ``ok`` with a ``reason`` code and a
    ``message`` for people."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    result: JsonObject | None = None
    reason: str | None = None
    message: str = ""

    @model_validator(mode="after")
    def _result_iff_ok(self) -> ChildReply:
        if self.ok != (self.result is not None):
            raise ValueError("a reply has a result exactly when it is ok")
        return self

    @classmethod
    def done(cls, result: JsonObject) -> ChildReply:
        """The reply of a job that succeeded; ``result`` as JSON carries it (tuples become
        lists)."""
        return cls(ok=True, result=plain_json(result))

    @classmethod
    def refused(cls, reason: str, message: str) -> ChildReply:
        """The reply of a job that failed, and why (``reason`` is a stable code)."""
        return cls(ok=False, reason=reason, message=message)

    def to_bytes(self) -> bytes:
        """The reply as one line of JSON (no newline inside)."""
        return json.dumps(self.model_dump(mode="json", exclude_none=True)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> ChildReply | None:
        """The reply in ``data``; None if it is not one (garbled, truncated, foreign)."""
        try:
            return cls.model_validate(json.loads(data))
        except (ValueError, ValidationError):
            return None

    @classmethod
    def from_output(cls, out: bytes) -> ChildReply | None:
        """The reply on the last line of a child's stdout; None if there is none."""
        lines = out.strip().splitlines()
        return cls.from_bytes(lines[-1]) if lines else None
