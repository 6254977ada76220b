"""Health routes: no token needed."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/v1/health", summary="Liveness of the /v1 API (no token needed)")
@router.get(
    "/health",
    summary="The same, where vLLM, SGLang and TGI answer it (no token needed)",
    description="OpenAI-compatible tooling checks `GET /health` before it starts (GuideLLM "
    "does, and so do load balancers set up for those servers).",
)
def health() -> dict[str, str]:
    return {"status": "ok"}
