"""JSON shapes of the program routes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from pteforge.storage.domain import Program


class ProgramOut(BaseModel):
    """An uploaded program and the inputs/outputs of each of its methods."""

    id: str
    name: str
    sha256: str
    size_bytes: int
    methods: list[dict[str, Any]]
    created_at: datetime

    @classmethod
    def of(cls, program: Program) -> ProgramOut:
        return cls(
            id=program.id,
            name=program.name,
            sha256=program.sha256,
            size_bytes=program.size_bytes,
            methods=[m.to_json() for m in program.methods],
            created_at=program.created_at,
        )


class ProgramList(BaseModel):
    """``GET /v1/programs``: newest first."""

    programs: list[ProgramOut]
