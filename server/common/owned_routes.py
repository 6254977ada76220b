"""The get, list and delete routes of a kind of project-owned row (programs, artifacts), written
once: the reads are ``async`` with one threadpool hop for the store call (the event loop never
waits on the database), the delete is a plain route FastAPI runs in its threadpool.

This module does not use ``from __future__ import annotations``: FastAPI reads the route
signatures built here, whose path parameter name is only known when the routes are added.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from fastapi import APIRouter, Path, status
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from pteforge.server.auth.dependencies import CurrentPrincipal
from pteforge.server.common.owned_rows import OwnedRows
from pteforge.server.common.services import ServicesDep
from pteforge.server.http.listing import DEFAULT_LIMIT, LimitQuery

D = TypeVar("D")


@dataclass(frozen=True)
class OwnedRoutes(Generic[D]):
    """Routes of ``rows`` under ``/v1/{plural}``, addressed by the path parameter ``id_param``;
    ``out`` presents one row (the response model), ``list_model`` holds them in ``plural``."""

    rows: OwnedRows[D]
    plural: str
    id_param: str
    out: Callable[[D], BaseModel]
    out_model: type[BaseModel]
    list_model: type[BaseModel]

    @property
    def _item_path(self) -> str:
        return f"/{self.plural}/{{{self.id_param}}}"

    def _row_id(self) -> Any:
        return Annotated[str, Path(alias=self.id_param)]

    def add_get(self, router: APIRouter, summary: str) -> None:
        """``GET /{plural}/{id}``: the row, or 404."""
        rows, out = self.rows, self.out

        async def get(
            row_id: self._row_id(),  # type: ignore[valid-type]
            services: ServicesDep,
            principal: CurrentPrincipal,
        ) -> BaseModel:
            return out(await run_in_threadpool(rows.get, services, principal.project_id, row_id))

        router.get(
            self._item_path, response_model=self.out_model, summary=summary, name=f"get_{rows.noun}"
        )(get)

    def add_list(self, router: APIRouter, summary: str) -> None:
        """``GET /{plural}?limit=N``: the project's rows, newest first."""
        rows, out, plural, list_model = self.rows, self.out, self.plural, self.list_model

        async def list_rows(
            services: ServicesDep, principal: CurrentPrincipal, limit: LimitQuery = DEFAULT_LIMIT
        ) -> BaseModel:
            found = await run_in_threadpool(rows.list, services, principal.project_id, limit)
            return list_model.model_validate({plural: [out(row) for row in found]})

        router.get(f"/{plural}", response_model=list_model, summary=summary, name=f"list_{plural}")(
            list_rows
        )

    def add_delete(self, router: APIRouter, summary: str) -> None:
        """``DELETE /{plural}/{id}``: 204, or 404."""
        rows = self.rows

        def delete(
            row_id: self._row_id(),  # type: ignore[valid-type]
            services: ServicesDep,
            principal: CurrentPrincipal,
        ) -> None:
            rows.delete(services, principal.project_id, row_id)

        router.delete(
            self._item_path,
            status_code=status.HTTP_204_NO_CONTENT,
            response_class=Response,
            summary=summary,
            name=f"delete_{rows.noun}",
        )(delete)
