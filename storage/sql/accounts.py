"""Projects and API tokens."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import ColumnElement, Select, bindparam, func, select
from sqlalchemy.orm import QueryableAttribute, Session

from pteforge.storage import domain
from pteforge.storage.errors import ConflictError, NotFoundError
from pteforge.storage.ids import new_id
from pteforge.storage.models import (
    ArtifactRow,
    BlobRow,
    ModelRow,
    ModelTokenizerRow,
    ProgramRow,
    ProjectRow,
    TokenRow,
)
from pteforge.storage.sql import convert
from pteforge.storage.sql.errors import insert_row
from pteforge.storage.store import ProjectRepository, TokenRepository

TOKEN_PREFIX = "ptf_"

_tokens, _projects = TokenRow.__table__, ProjectRow.__table__
# Every authenticated /v1 request runs this: built once, as a Core statement of columns (no
# ORM entities to build and track), it costs a fraction of the ORM query it replaces.
_LIVE_TOKEN = (
    select(
        _tokens.c.id,
        _tokens.c.project_id,
        _tokens.c.name,
        _tokens.c.created_at,
        _projects.c.name.label("project_name"),
        _projects.c.created_at.label("project_created_at"),
    )
    .join_from(_tokens, _projects, _projects.c.id == _tokens.c.project_id)
    .where(_tokens.c.token_sha256 == bindparam("sha256"), _tokens.c.revoked_at.is_(None))
)


def _total(size: ColumnElement[int] | QueryableAttribute[int]) -> Select[tuple[int]]:
    return select(func.coalesce(func.sum(size), 0))


_STORED = (
    _total(ProgramRow.size_bytes).where(ProgramRow.project_id == bindparam("project")),
    _total(ArtifactRow.size_bytes).where(ArtifactRow.project_id == bindparam("project")),
    _total(BlobRow.size)
    .join_from(ArtifactRow, BlobRow, BlobRow.sha256 == ArtifactRow.bundle_sha256)
    .where(ArtifactRow.project_id == bindparam("project")),
    _total(func.coalesce(ArtifactRow.data_size, 0)).where(
        ArtifactRow.project_id == bindparam("project")
    ),
    _total(ModelTokenizerRow.tokenizer_size + func.coalesce(ModelTokenizerRow.config_size, 0))
    .join_from(ModelTokenizerRow, ModelRow, ModelRow.id == ModelTokenizerRow.model_id)
    .where(ModelRow.project_id == bindparam("project")),
)
"""What a project stores: programs, artifacts, artifacts' bundles and .ptd files,
tokenizers and configs."""


def hash_token(plaintext: str) -> str:
    """The stored form of a token: sha256 suffices because tokens carry 256 random bits."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


class SqlProjects(ProjectRepository):
    def __init__(self, session: Session, clock: Callable[[], datetime]) -> None:
        self._session = session
        self._clock = clock

    def create(self, name: str) -> domain.Project:
        if not name.strip():
            raise ValueError("project name must not be empty")
        row = ProjectRow(id=new_id("proj"), name=name, created_at=self._clock())
        insert_row(self._session, row, f"project {name!r}")
        return convert.project(row)

    def get(self, project_id: str) -> domain.Project | None:
        row = self._session.get(ProjectRow, project_id)
        return None if row is None else convert.project(row)

    def get_by_name(self, name: str) -> domain.Project | None:
        row = self._session.scalars(select(ProjectRow).where(ProjectRow.name == name)).first()
        return None if row is None else convert.project(row)

    def get_or_create(self, name: str) -> domain.Project:
        existing = self.get_by_name(name)
        if existing is not None:
            return existing
        try:
            return self.create(name)
        except ConflictError:
            # Created concurrently by another process since we looked.
            found = self.get_by_name(name)
            if found is None:
                raise
            return found

    def stored_bytes(self, project_id: str, lock: bool = False) -> int:
        if lock:  # FOR NO KEY UPDATE: rows referencing the project may still be inserted
            self._session.get(ProjectRow, project_id, with_for_update={"key_share": True})
        bind = {"project": project_id}
        return sum(int(self._session.scalar(query, bind) or 0) for query in _STORED)


class SqlTokens(TokenRepository):
    def __init__(self, session: Session, clock: Callable[[], datetime]) -> None:
        self._session = session
        self._clock = clock

    def create(self, project_id: str, name: str) -> domain.IssuedToken:
        if self._session.get(ProjectRow, project_id) is None:
            raise NotFoundError(f"project {project_id} not found")
        plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = TokenRow(
            id=new_id("tok"),
            project_id=project_id,
            name=name,
            token_sha256=hash_token(plaintext),
            created_at=self._clock(),
            revoked_at=None,
        )
        insert_row(self._session, row, f"token {name!r}")
        return domain.IssuedToken(token=convert.token(row), plaintext=plaintext)

    def resolve(self, plaintext: str) -> tuple[domain.ApiToken, domain.Project] | None:
        found = self._session.execute(_LIVE_TOKEN, {"sha256": hash_token(plaintext)}).first()
        if found is None:
            return None
        token = domain.ApiToken(found.id, found.project_id, found.name, found.created_at, None)
        return token, domain.Project(found.project_id, found.project_name, found.project_created_at)

    def list(self, project_id: str) -> list[domain.ApiToken]:
        rows = self._session.scalars(
            select(TokenRow).where(TokenRow.project_id == project_id).order_by(TokenRow.created_at)
        )
        return [convert.token(r) for r in rows]

    def revoke(self, project_id: str, token_id: str) -> bool:
        row = self._session.get(TokenRow, token_id)
        if row is None or row.project_id != project_id:
            return False
        if row.revoked_at is None:
            row.revoked_at = self._clock()
            self._session.flush()
        return True
