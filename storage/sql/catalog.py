"""Programs and artifacts: rows that reference stored content."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pteforge.storage import domain
from pteforge.storage.errors import NotFoundError, StorageError
from pteforge.storage.ids import new_id
from pteforge.storage.models import ArtifactRow, BlobRow, ProgramRow, ProjectRow
from pteforge.storage.sql import convert
from pteforge.storage.sql.errors import insert_row
from pteforge.storage.sql.references import release_blob
from pteforge.storage.store import ArtifactRepository, ProgramRepository


def _check_owner_and_blob(session: Session, project_id: str, blob: domain.BlobRef) -> None:
    if session.get(ProjectRow, project_id) is None:
        raise NotFoundError(f"project {project_id} not found")
    size = session.scalar(select(BlobRow.size).where(BlobRow.sha256 == blob.sha256))
    if size is None:
        raise NotFoundError(f"blob {blob.sha256} not found; write the content first")
    if size != blob.size:
        raise StorageError(f"blob {blob.sha256} has {size} bytes, not {blob.size}")


def _delete_releasing_content(session: Session, row: ProgramRow | ArtifactRow | None) -> bool:
    """Delete ``row`` and release its content, which goes only if no other row references it."""
    if row is None:
        return False
    sha256 = row.blob_sha256
    session.delete(row)
    session.flush()
    release_blob(session, sha256)
    return True


class SqlPrograms(ProgramRepository):
    def __init__(self, session: Session, clock: Callable[[], datetime]) -> None:
        self._session = session
        self._clock = clock

    def create(
        self,
        project_id: str,
        name: str,
        blob: domain.BlobRef,
        methods: Sequence[domain.MethodSpec],
    ) -> domain.Program:
        _check_owner_and_blob(self._session, project_id, blob)
        row = ProgramRow(
            id=new_id("prog"),
            project_id=project_id,
            name=name,
            blob_sha256=blob.sha256,
            size_bytes=blob.size,
            methods=domain.methods_to_json(methods),
            created_at=self._clock(),
        )
        insert_row(self._session, row, f"program {name!r}")
        return convert.program(row)

    def _row(self, project_id: str, program_id: str) -> ProgramRow | None:
        row = self._session.get(ProgramRow, program_id)
        return row if row is not None and row.project_id == project_id else None

    def get(self, project_id: str, program_id: str) -> domain.Program | None:
        row = self._row(project_id, program_id)
        return None if row is None else convert.program(row)

    def list(self, project_id: str, limit: int = 100) -> list[domain.Program]:
        rows = self._session.scalars(
            select(ProgramRow)
            .where(ProgramRow.project_id == project_id)
            .order_by(ProgramRow.created_at.desc(), ProgramRow.id)
            .limit(limit)
        )
        return [convert.program(r) for r in rows]

    def delete(self, project_id: str, program_id: str) -> bool:
        return _delete_releasing_content(self._session, self._row(project_id, program_id))


class SqlArtifacts(ArtifactRepository):
    def __init__(self, session: Session, clock: Callable[[], datetime]) -> None:
        self._session = session
        self._clock = clock

    def create(
        self,
        project_id: str,
        program_id: str | None,
        blob: domain.BlobRef,
        plan: Mapping[str, Any],
        plan_hash: str,
        report: Mapping[str, Any],
        methods: Sequence[domain.MethodSpec],
    ) -> domain.Artifact:
        _check_owner_and_blob(self._session, project_id, blob)
        if program_id is not None and self._session.get(ProgramRow, program_id) is None:
            raise NotFoundError(f"program {program_id} not found")
        row = ArtifactRow(
            id=new_id("art"),
            project_id=project_id,
            program_id=program_id,
            blob_sha256=blob.sha256,
            size_bytes=blob.size,
            plan=dict(plan),
            plan_hash=plan_hash,
            report=dict(report),
            methods=domain.methods_to_json(methods),
            created_at=self._clock(),
        )
        insert_row(self._session, row, f"artifact of program {program_id} plan {plan_hash}")
        return convert.artifact(row)

    def _row(self, project_id: str, artifact_id: str) -> ArtifactRow | None:
        row = self._session.get(ArtifactRow, artifact_id)
        return row if row is not None and row.project_id == project_id else None

    def get(self, project_id: str, artifact_id: str) -> domain.Artifact | None:
        row = self._row(project_id, artifact_id)
        return None if row is None else convert.artifact(row)

    def get_any(self, artifact_id: str) -> domain.Artifact | None:
        row = self._session.get(ArtifactRow, artifact_id)
        return None if row is None else convert.artifact(row)

    def find_compiled(self, program_id: str, plan_hash: str) -> domain.Artifact | None:
        row = self._session.scalars(
            select(ArtifactRow).where(
                ArtifactRow.program_id == program_id, ArtifactRow.plan_hash == plan_hash
            )
        ).first()
        return None if row is None else convert.artifact(row)

    def list(self, project_id: str, limit: int = 100) -> list[domain.Artifact]:
        rows = self._session.scalars(
            select(ArtifactRow)
            .where(ArtifactRow.project_id == project_id)
            .order_by(ArtifactRow.created_at.desc(), ArtifactRow.id)
            .limit(limit)
        )
        return [convert.artifact(r) for r in rows]

    def delete(self, project_id: str, artifact_id: str) -> bool:
        return _delete_releasing_content(self._session, self._row(project_id, artifact_id))
