"""Programs and artifacts: rows that reference stored content."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from pteforge.storage import domain
from pteforge.storage.errors import ConflictError, NotFoundError, StorageError
from pteforge.storage.ids import new_id
from pteforge.storage.models import ArtifactRow, BlobRow, ProgramRow, ProjectRow
from pteforge.storage.sql import convert
from pteforge.storage.sql.errors import insert_row
from pteforge.storage.sql.model_names import versions_serving
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
    contents = [
        row.blob_sha256,
        getattr(row, "bundle_sha256", None),
        getattr(row, "data_sha256", None),
    ]
    session.delete(row)
    session.flush()
    for sha256 in contents:
        if sha256 is not None:
            release_blob(session, sha256)
    return True


_Row = TypeVar("_Row", ProgramRow, ArtifactRow)
_Domain = TypeVar("_Domain", domain.Program, domain.Artifact)


class _ContentRows(Generic[_Row, _Domain]):
    """A project's rows of one table that reference stored content: what programs and
    artifacts share (looked up within the project, newest first, deleted with their content)."""

    _model: type[_Row]
    _to_domain: Callable[[_Row], _Domain]

    def __init__(self, session: Session, clock: Callable[[], datetime]) -> None:
        self._session = session
        self._clock = clock

    def _insert(self, id_prefix: str, what: str, blob: domain.BlobRef, **columns: Any) -> _Domain:
        """Insert a new row referencing ``blob`` (``what`` names it in a ConflictError) with
        ``columns``, those that are not the same for every table."""
        row = self._model(
            id=new_id(id_prefix),
            blob_sha256=blob.sha256,
            size_bytes=blob.size,
            created_at=self._clock(),
            **columns,
        )
        insert_row(self._session, row, what)
        return self._to_domain(row)

    def _row(self, project_id: str, row_id: str) -> _Row | None:
        row = self._session.get(self._model, row_id)
        return row if row is not None and row.project_id == project_id else None

    def get(self, project_id: str, row_id: str) -> _Domain | None:
        row = self._row(project_id, row_id)
        return None if row is None else self._to_domain(row)

    def list(self, project_id: str, limit: int = 100) -> list[_Domain]:
        model = self._model
        rows = self._session.scalars(
            select(model)
            .where(model.project_id == project_id)
            .order_by(model.created_at.desc(), model.id)
            .limit(limit)
        )
        return [self._to_domain(r) for r in rows]

    def delete(self, project_id: str, row_id: str) -> bool:
        return _delete_releasing_content(self._session, self._row(project_id, row_id))


class SqlPrograms(_ContentRows[ProgramRow, domain.Program], ProgramRepository):
    _model = ProgramRow
    _to_domain = staticmethod(convert.program)

    def create(
        self,
        project_id: str,
        name: str,
        blob: domain.BlobRef,
        methods: Sequence[domain.MethodSignature],
    ) -> domain.Program:
        _check_owner_and_blob(self._session, project_id, blob)
        return self._insert(
            "prog",
            f"program {name!r}",
            blob,
            project_id=project_id,
            name=name,
            methods=domain.methods_to_json(methods),
        )


class SqlArtifacts(_ContentRows[ArtifactRow, domain.Artifact], ArtifactRepository):
    _model = ArtifactRow
    _to_domain = staticmethod(convert.artifact)

    def create(
        self,
        project_id: str,
        program_id: str | None,
        blob: domain.BlobRef,
        plan: Mapping[str, Any],
        plan_hash: str,
        report: Mapping[str, Any],
        methods: Sequence[domain.MethodSignature],
        bundle: domain.BlobRef | None = None,
        data: domain.BlobRef | None = None,
    ) -> domain.Artifact:
        for content in (blob, bundle, data):
            if content is not None:
                _check_owner_and_blob(self._session, project_id, content)
        if program_id is not None and self._session.get(ProgramRow, program_id) is None:
            raise NotFoundError(f"program {program_id} not found")
        what = f"artifact of program {program_id} plan {plan_hash}"
        return self._insert(
            "art",
            what,
            blob,
            project_id=project_id,
            program_id=program_id,
            plan=dict(plan),
            plan_hash=plan_hash,
            report=dict(report),
            methods=domain.methods_to_json(methods),
            bundle_sha256=None if bundle is None else bundle.sha256,
            data_sha256=None if data is None else data.sha256,
            data_size=None if data is None else data.size,
        )

    def delete(self, project_id: str, row_id: str) -> bool:
        """Refused (ConflictError naming them) while model versions serve the artifact (the
        row locked first, so a version being added meanwhile is waited for and seen)."""
        row = self._session.get(ArtifactRow, row_id, with_for_update=True)
        if row is None or row.project_id != project_id:
            return False
        serving = versions_serving(self._session, row_id)
        if serving:
            named = ", ".join(f"{name!r} version {version}" for name, version in serving)
            raise ConflictError(
                f"artifact {row_id!r} is served by model {named}; delete those versions first"
            )
        return super().delete(project_id, row_id)

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
