"""Lookup, listing and deletion of the rows a project owns (programs, artifacts), done one way:
another project's row is as absent as a missing one (404 naming the id)."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pteforge.server.common.services import Services
from pteforge.server.errors import NotFoundError
from pteforge.storage.store import Transaction

D = TypeVar("D")


class OwnedRepository(Protocol[D]):
    """What the store's program and artifact repositories have in common."""

    def get(self, project_id: str, row_id: str, /) -> D | None: ...

    def list(self, project_id: str, limit: int = 100, /) -> builtins.list[D]: ...

    def delete(self, project_id: str, row_id: str, /) -> bool: ...


@dataclass(frozen=True)
class OwnedRows(Generic[D]):
    """The use-cases of one kind of project-owned row; ``noun`` names it in 404 messages."""

    noun: str
    repository: Callable[[Transaction], OwnedRepository[D]]

    def get(self, services: Services, project_id: str, row_id: str) -> D:
        """The row, or 404."""
        with services.store.transaction() as tx:
            return self.get_in(tx, project_id, row_id)

    def get_in(self, tx: Transaction, project_id: str, row_id: str) -> D:
        """The row, read in the caller's transaction ``tx`` (a use-case that goes on to
        write), or 404."""
        row = self.repository(tx).get(project_id, row_id)
        if row is None:
            raise NotFoundError(f"{self.noun} {row_id!r} not found")
        return row

    def list(self, services: Services, project_id: str, limit: int) -> builtins.list[D]:
        """The project's rows, newest first."""
        with services.store.transaction() as tx:
            return self.repository(tx).list(project_id, limit)

    def delete(self, services: Services, project_id: str, row_id: str) -> None:
        """Delete the row (its content goes unless another row references it), or 404."""
        with services.store.transaction() as tx:
            if not self.repository(tx).delete(project_id, row_id):
                raise NotFoundError(f"{self.noun} {row_id!r} not found")
