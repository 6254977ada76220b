"""Routes of the backend catalog."""

from __future__ import annotations

from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from pteforge.server.auth.dependencies import CurrentPrincipal
from pteforge.server.backends_api.schemas import CatalogEntryOut
from pteforge.server.common.services import ServicesDep

router = APIRouter(prefix="/v1", tags=["backends"])


@router.get(
    "/backends",
    summary="List lowering targets, their options and where they run",
    response_model=list[CatalogEntryOut],
)
async def list_backends(services: ServicesDep, _principal: CurrentPrincipal) -> Response:
    """Every catalog entry: name, kind, backend id, options schema, ``can_execute`` here;
    then the program-wide plan options (kind ``plan_option``). Described once per process."""
    # The body is prebuilt once (Services.catalog_json); response_model documents its shape.
    return Response(await run_in_threadpool(services.catalog_json), media_type="application/json")
