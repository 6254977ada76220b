"""Routes of model names: versions created, listed, read and deleted.

A model is a stable name for a series of artifact versions; ``/v2/models/{name}.{method}``
serves its latest version and ``/v2/models/{name}.{method}/versions/{version}`` a pinned one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from pteforge.server.auth.dependencies import CurrentPrincipal
from pteforge.server.common.services import ServicesDep
from pteforge.server.http.listing import DEFAULT_LIMIT, MAX_LIMIT
from pteforge.server.models import service
from pteforge.server.models.schemas import (
    ModelDetail,
    ModelList,
    ModelOut,
    ModelVersionCreated,
    ModelVersionIn,
)

router = APIRouter(prefix="/v1", tags=["models"])

ModelLimit = Annotated[
    int, Query(ge=1, le=MAX_LIMIT, description="At most this many models, by name.")
]


@router.post(
    "/models/{name}/versions",
    status_code=status.HTTP_201_CREATED,
    response_model=ModelVersionCreated,
    summary="Add the next version of a model (the first one creates it)",
)
def create_version(
    name: str, body: ModelVersionIn, services: ServicesDep, principal: CurrentPrincipal
) -> ModelVersionCreated:
    """The version serves one of the project's artifacts (404 for any other); versions
    count 1, 2, ... and a number is never reused, even after its version was deleted.
    The name follows `[A-Za-z0-9][A-Za-z0-9_-]{0,63}` (422 naming the rule otherwise).
    An artifact that a version serves cannot be deleted (`DELETE /v1/artifacts/{id}` answers
    409 naming the model and version) until that version is deleted."""
    version = service.add_version(services, principal.project_id, name, body.artifact_id)
    return ModelVersionCreated.of(name, version)


@router.get("/models", response_model=ModelList, summary="The project's models")
async def list_models(
    services: ServicesDep, principal: CurrentPrincipal, limit: ModelLimit = DEFAULT_LIMIT
) -> ModelList:
    """The project's models, by name, in the OpenAI list shape."""
    found = await run_in_threadpool(service.list_models, services, principal.project_id, limit)
    return ModelList(data=[ModelOut.of(model) for model in found])


@router.get("/models/{name}", response_model=ModelDetail, summary="A model and its versions")
async def get_model(name: str, services: ServicesDep, principal: CurrentPrincipal) -> ModelDetail:
    """The model with its versions, oldest first; 404 for another project's model."""
    model, versions = await run_in_threadpool(
        service.get_model, services, principal.project_id, name
    )
    return ModelDetail.with_versions(model, versions)


@router.delete(
    "/models/{name}/versions/{version}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a version of a model",
)
def delete_version(
    name: str, version: int, services: ServicesDep, principal: CurrentPrincipal
) -> None:
    """The artifact stays. Deleting the latest version makes the one before it the latest;
    a model whose versions are all deleted stays listed (`latest_version` null) and keeps
    counting, so its next version never takes a number used before."""
    service.delete_version(services, principal.project_id, name, version)
