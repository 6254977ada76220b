"""JSON shapes of the artifact routes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from pteforge.storage.domain import Artifact


class ArtifactOut(BaseModel):
    """An artifact: the `.pte` digest, what it was built from, and the manager's report."""

    id: str
    sha256: str
    size_bytes: int
    program_id: str | None
    plan: dict[str, Any]
    methods: list[dict[str, Any]]
    report: dict[str, Any]
    created_at: datetime

    @classmethod
    def of(cls, artifact: Artifact) -> ArtifactOut:
        return cls(
            id=artifact.id,
            sha256=artifact.sha256,
            size_bytes=artifact.size_bytes,
            program_id=artifact.program_id,
            plan=artifact.plan,
            methods=[m.to_json() for m in artifact.methods],
            report=artifact.report,
            created_at=artifact.created_at,
        )


class ArtifactList(BaseModel):
    """``GET /v1/artifacts``: newest first."""

    artifacts: list[ArtifactOut]
