"""Routes of model names: versions created, listed, read and deleted.

A model is a stable name for a series of artifact versions; ``/v2/models/{name}.{method}``
serves its latest version and ``/v2/models/{name}.{method}/versions/{version}`` a pinned one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, status
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from pteforge.server.auth.dependencies import CurrentPrincipal
from pteforge.server.common.openapi_doc import multipart_body
from pteforge.server.common.services import ServicesDep
from pteforge.server.http.bodies import CappedJsonRoute
from pteforge.server.http.listing import DEFAULT_LIMIT, MAX_LIMIT
from pteforge.server.http.uploads import store_upload
from pteforge.server.models import service, tokenizers
from pteforge.server.models.schemas import (
    ModelDetail,
    ModelList,
    ModelOut,
    ModelVersionCreated,
    ModelVersionIn,
    TokenizerOut,
)

router = APIRouter(prefix="/v1", tags=["models"], route_class=CappedJsonRoute)

ModelLimit = Annotated[
    int, Query(ge=1, le=MAX_LIMIT, description="At most this many models, by name.")
]


@router.post(
    "/models/{name}/versions",
    status_code=status.HTTP_201_CREATED,
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


@router.get("/models", summary="The project's models")
async def list_models(
    services: ServicesDep, principal: CurrentPrincipal, limit: ModelLimit = DEFAULT_LIMIT
) -> ModelList:
    """The project's models, by name, in the OpenAI list shape."""
    found = await run_in_threadpool(service.list_models, services, principal.project_id, limit)
    return ModelList(data=[ModelOut.of(model) for model in found])


@router.get("/models/{name}", summary="A model and its versions")
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


_TOKENIZER_DOC = multipart_body(
    {
        "type": "object",
        "required": [tokenizers.TOKENIZER_PART],
        "properties": {
            tokenizers.TOKENIZER_PART: {
                "type": "string",
                "format": "binary",
                "description": "A Hugging Face tokenizer.json.",
            },
            tokenizers.CONFIG_PART: {
                "type": "string",
                "format": "binary",
                "description": "Optional tokenizer_config.json; its chat_template renders chats.",
            },
            tokenizers.TEMPLATE_PART: {
                "type": "string",
                "format": "binary",
                "description": "Optional chat_template.jinja (as transformers saves it), "
                "stored as the config's chat_template.",
            },
        },
    }
)


@router.put(
    "/models/{name}/versions/{version}/tokenizer",
    status_code=status.HTTP_201_CREATED,
    summary="Attach a tokenizer to a model version",
    openapi_extra=_TOKENIZER_DOC,
)
async def put_tokenizer(
    name: str, version: int, request: Request, services: ServicesDep, principal: CurrentPrincipal
) -> TokenizerOut:
    """Replaces the version's tokenizer. The files are checked as JSON only (422 naming what
    is wrong: not a tokenizer.json, a chat_template that is not a string); the server never
    runs them. 404 for a version the project does not have."""
    found = await store_upload(
        request,
        services,
        principal.project_id,
        tokenizers.attach_tokenizer,
        name,
        version,
        check_name=tokenizers.check_part_name,
        cap=tokenizers.MAX_UPLOAD_BYTES,
    )
    return TokenizerOut.of(name, version, found)


@router.get(
    "/models/{name}/versions/{version}/tokenizer",
    summary="The tokenizer of a model version",
)
async def get_tokenizer(
    name: str, version: int, services: ServicesDep, principal: CurrentPrincipal
) -> TokenizerOut:
    """404 when the version has none (or the project has no such version)."""
    found = await run_in_threadpool(
        tokenizers.get_tokenizer, services, principal.project_id, name, version
    )
    return TokenizerOut.of(name, version, found)
