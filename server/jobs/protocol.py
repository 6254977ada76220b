"""The messages a lowering process sends its worker: one JSON object per line on a pipe.

``{"stage": NAME}`` on each stage change, then exactly one of ``{"result": {...}}`` or
``{"error": {"code", "message"}}``. Kept separate from stdout so library chatter cannot
corrupt it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

STAGES = ("loading", "to_edge", "partition", "preprocess", "emit", "store")


@dataclass
class LoweringRequest:
    """What one lowering process does: read ``program_path``, apply ``plan``, write ``.pte``."""

    program_path: str
    plan: dict[str, Any]
    output_path: str
    memory_limit_bytes: int | None = None

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str) -> LoweringRequest:
        return cls(**json.loads(text))


@dataclass
class LoweringOutcome:
    """What the worker learned from a finished lowering process."""

    result: dict[str, Any] | None = None
    error_code: str | None = None
    error_message: str | None = None
    stages: list[str] = field(default_factory=list)


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()
