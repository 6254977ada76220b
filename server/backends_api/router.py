"""Routes of the backend catalog."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from pteforge.server.auth.dependencies import CurrentPrincipal
from pteforge.server.services import ServicesDep

router = APIRouter(prefix="/v1", tags=["backends"])


@router.get("/backends", summary="List lowering targets, their options and where they run")
def list_backends(services: ServicesDep, _principal: CurrentPrincipal) -> list[dict[str, Any]]:
    """Every catalog entry: name, kind, backend id, options schema, ``can_execute`` here;
    then the program-wide plan options (kind ``plan_option``)."""
    entries: list[dict[str, Any]] = services.catalog.describe_with_plan_options()
    return entries
