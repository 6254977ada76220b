"""Health routes: no token needed."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/v1/health", summary="Liveness of the /v1 API (no token needed)")
def health() -> dict[str, str]:
    return {"status": "ok"}
