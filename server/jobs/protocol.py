"""What a worker asks of a lowering child and what the child answers.

The child sends ``{"stage": NAME}`` on each stage change, then exactly one of ``{"result":
{"report", "methods", "numerics"}}`` or ``{"error": {"code", "message"}}`` over a pipe private
to the two processes (never stdout, where library chatter goes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LoweringRequest:
    """What one lowering process does: read ``program_path``, apply ``plan``, write ``.pte``."""

    program_path: str
    plan: dict[str, Any]
    output_path: str
    memory_limit_bytes: int | None = None


@dataclass
class LoweringOutcome:
    """What the worker learned from a finished lowering process."""

    result: dict[str, Any] | None = None
    error_code: str | None = None
    error_message: str | None = None
    stages: list[str] = field(default_factory=list)
