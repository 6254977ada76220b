"""Model names and versions over SQL (see :class:`pteforge.storage.model_names.ModelRepository`).

A new version takes its number from the model row's ``next_version`` with one ``UPDATE ...
RETURNING``: the row lock (PostgreSQL) or the write lock (SQLite's ``BEGIN IMMEDIATE``) makes
concurrent creates take turns, and the primary key (model, version) is the backstop.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, delete, false, func, select, update
from sqlalchemy.orm import Session

from pteforge.storage import domain
from pteforge.storage.errors import ConflictError, NotFoundError
from pteforge.storage.ids import new_id
from pteforge.storage.model_names import MAX_VERSION, ModelRepository
from pteforge.storage.models import (
    ArtifactRow,
    BlobRow,
    ModelRow,
    ModelTokenizerRow,
    ModelVersionRow,
    ProjectRow,
)
from pteforge.storage.sql.errors import insert_row

_LATEST = (
    select(func.max(ModelVersionRow.version))
    .where(ModelVersionRow.model_id == ModelRow.id)
    .correlate(ModelRow)
    .scalar_subquery()
)

_TOKENIZER_OF_VERSION = and_(
    ModelTokenizerRow.model_id == ModelVersionRow.model_id,
    ModelTokenizerRow.version == ModelVersionRow.version,
)


def _is_version(version: int) -> ColumnElement[bool]:
    """``ModelVersionRow.version == version``; false, without sending the number, for one no
    version has (SQLite refuses to bind an integer past 64 bits: a 500 on every route)."""
    return ModelVersionRow.version == version if 0 < version <= MAX_VERSION else false()


def _one_version(versions: Select[Any], version: int | None) -> Select[Any]:
    """``versions`` narrowed to ``version``, or to the latest when it is None."""
    if version is None:
        return versions.order_by(ModelVersionRow.version.desc()).limit(1)
    return versions.where(_is_version(version))


def _models(project_id: str) -> Select[Any]:
    """The project's models with their project's name and latest version."""
    return (
        select(ModelRow, ProjectRow.name, _LATEST)
        .join(ProjectRow, ProjectRow.id == ModelRow.project_id)
        .where(ModelRow.project_id == project_id)
    )


def _model(row: ModelRow, project_name: str, latest: int | None) -> domain.Model:
    return domain.Model(
        id=row.id,
        project_id=row.project_id,
        project_name=project_name,
        name=row.name,
        created_at=row.created_at,
        latest_version=latest,
    )


def versions_serving(session: Session, artifact_id: str) -> list[tuple[str, int]]:
    """The (model name, version) pairs that serve ``artifact_id``, by name and version."""
    rows = session.execute(
        select(ModelRow.name, ModelVersionRow.version)
        .join(ModelRow, ModelRow.id == ModelVersionRow.model_id)
        .where(ModelVersionRow.artifact_id == artifact_id)
        .order_by(ModelRow.name, ModelVersionRow.version)
    )
    return [(name, int(version)) for name, version in rows]


def _tokenizer(row: ModelTokenizerRow) -> domain.ModelTokenizer:
    config = None
    if row.config_sha256 is not None and row.config_size is not None:
        config = domain.BlobRef(row.config_sha256, row.config_size)
    return domain.ModelTokenizer(
        domain.BlobRef(row.tokenizer_sha256, row.tokenizer_size), config, row.created_at
    )


def _version(row: ModelVersionRow) -> domain.ModelVersion:
    return domain.ModelVersion(row.version, row.artifact_id, row.created_at)


class SqlModels(ModelRepository):
    def __init__(self, session: Session, clock: Callable[[], datetime]) -> None:
        self._session = session
        self._clock = clock

    def _model_id(self, project_id: str, name: str) -> str | None:
        return self._session.scalar(
            select(ModelRow.id).where(ModelRow.project_id == project_id, ModelRow.name == name)
        )

    def _model_id_or_new(self, project_id: str, name: str) -> str:
        found = self._model_id(project_id, name)
        if found is not None:
            return found
        row = ModelRow(
            id=new_id("mdl"), project_id=project_id, name=name, next_version=1,
            created_at=self._clock(),
        )  # fmt: skip
        try:
            insert_row(self._session, row, f"model {name!r}")
        except ConflictError:
            found = self._model_id(project_id, name)  # created concurrently since we looked
            if found is None:
                raise
            return found
        return row.id

    def _take_number(self, model_id: str) -> int:
        taken = self._session.execute(
            update(ModelRow)
            .where(ModelRow.id == model_id)
            .values(next_version=ModelRow.next_version + 1)
            .returning(ModelRow.next_version)
            .execution_options(synchronize_session=False)
        ).scalar_one()
        return int(taken) - 1

    def add_version(self, project_id: str, name: str, artifact_id: str) -> domain.ModelVersion:
        # shared lock: an artifact deleted meanwhile is not found here, or its deletion
        # waits and sees this version (on PostgreSQL the insert failed its foreign key,
        # a 409 naming the constraint; SQLite takes one writer at a time)
        artifact = self._session.get(ArtifactRow, artifact_id, with_for_update={"read": True})
        if artifact is None or artifact.project_id != project_id:
            raise NotFoundError(f"artifact {artifact_id!r} not found")
        model_id = self._model_id_or_new(project_id, name)
        row = ModelVersionRow(
            model_id=model_id, version=self._take_number(model_id), artifact_id=artifact_id,
            created_at=self._clock(),
        )  # fmt: skip
        insert_row(self._session, row, f"version {row.version} of model {name!r}")
        return _version(row)

    def get(self, project_id: str, name: str) -> domain.Model | None:
        found = self._session.execute(_models(project_id).where(ModelRow.name == name)).first()
        return None if found is None else _model(*found)

    def list(self, project_id: str, limit: int = 100) -> list[domain.Model]:
        rows = self._session.execute(_models(project_id).order_by(ModelRow.name).limit(limit))
        return [_model(*row) for row in rows]

    def _versions(self, project_id: str, name: str, *columns: Any) -> Select[Any]:
        """The model's versions (their rows, or ``columns`` of them and what is joined)."""
        return (
            select(*(columns or (ModelVersionRow,)))
            .select_from(ModelVersionRow)
            .join(ModelRow, ModelRow.id == ModelVersionRow.model_id)
            .where(ModelRow.project_id == project_id, ModelRow.name == name)
        )

    def versions(self, project_id: str, name: str) -> builtins.list[domain.ModelVersion]:
        query = self._versions(project_id, name).order_by(ModelVersionRow.version)
        return [_version(row) for row in self._session.scalars(query)]

    def all_versions(
        self, project_id: str, limit: int
    ) -> builtins.list[tuple[str, domain.ModelVersion]]:
        query = (
            select(ModelRow.name, ModelVersionRow)
            .join(ModelRow, ModelRow.id == ModelVersionRow.model_id)
            .where(ModelRow.project_id == project_id)
            .order_by(ModelRow.name, ModelVersionRow.version)
            .limit(limit)
        )
        return [(name, _version(row)) for name, row in self._session.execute(query)]

    def artifact_id(self, project_id: str, name: str, version: int | None = None) -> str | None:
        query = _one_version(self._versions(project_id, name), version)
        row = self._session.scalars(query).first()
        return None if row is None else row.artifact_id

    def served(
        self, project_id: str, name: str, version: int | None = None
    ) -> domain.ServedVersion | None:
        columns = (
            ModelVersionRow.version,
            ArtifactRow.blob_sha256,
            ArtifactRow.size_bytes,
            ArtifactRow.data_sha256,
            ArtifactRow.data_size,
        )
        query = (
            self._versions(project_id, name, *columns, ModelTokenizerRow)
            .join(ArtifactRow, ArtifactRow.id == ModelVersionRow.artifact_id)
            .outerjoin(ModelTokenizerRow, _TOKENIZER_OF_VERSION)
            .where(ArtifactRow.project_id == project_id)
        )
        found = self._session.execute(_one_version(query, version)).first()
        if found is None:
            return None
        number, sha256, size, data_sha256, data_size, tokenizer = found
        return domain.ServedVersion(
            int(number),
            domain.BlobRef(sha256, size),
            None if tokenizer is None else _tokenizer(tokenizer),
            None if data_sha256 is None else domain.BlobRef(data_sha256, data_size),
        )

    def delete_version(self, project_id: str, name: str, version: int) -> bool:
        model_id = self._model_id(project_id, name)
        if model_id is None:
            return False
        mine = and_(ModelVersionRow.model_id == model_id, _is_version(version))
        deleted = self._session.execute(delete(ModelVersionRow).where(mine))
        return bool(deleted.rowcount)  # type: ignore[attr-defined]

    def _version_row(
        self, project_id: str, name: str, version: int, lock: bool = False
    ) -> ModelVersionRow | None:
        """The version's row; ``lock``: under a shared lock, so that a version deleted
        meanwhile is not found, or its deletion waits (on PostgreSQL a tokenizer's insert
        failed its foreign key, a 409 naming the constraint)."""
        query = self._versions(project_id, name).where(_is_version(version))
        if lock:
            query = query.with_for_update(read=True, of=ModelVersionRow)
        return self._session.scalars(query).first()

    def _require_blob(self, blob: domain.BlobRef) -> None:
        size = self._session.scalar(select(BlobRow.size).where(BlobRow.sha256 == blob.sha256))
        if size != blob.size:
            raise NotFoundError(f"blob {blob.sha256} of {blob.size} bytes not found")

    def set_tokenizer(
        self,
        project_id: str,
        name: str,
        version: int,
        tokenizer: domain.BlobRef,
        config: domain.BlobRef | None,
    ) -> domain.ModelTokenizer:
        found = self._version_row(project_id, name, version, lock=True)
        if found is None:
            raise NotFoundError(f"model {name!r} has no version {version}")
        for blob in (tokenizer, config):
            if blob is not None:
                self._require_blob(blob)
        row = self._session.get(ModelTokenizerRow, (found.model_id, version))
        if row is None:
            row = ModelTokenizerRow(model_id=found.model_id, version=version)
            self._session.add(row)
        row.tokenizer_sha256, row.tokenizer_size = tokenizer.sha256, tokenizer.size
        row.config_sha256 = None if config is None else config.sha256
        row.config_size = None if config is None else config.size
        row.created_at = self._clock()
        self._session.flush()
        return _tokenizer(row)

    def tokenizer(self, project_id: str, name: str, version: int) -> domain.ModelTokenizer | None:
        found = self._version_row(project_id, name, version)
        if found is None:
            return None
        row = self._session.get(ModelTokenizerRow, (found.model_id, version))
        return None if row is None else _tokenizer(row)
