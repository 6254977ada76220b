"""The /v2 Open Inference Protocol routes and ``/metrics``, as one router.

Thin HTTP glue: decoding/encoding lives in ``pteforge.runtime.protocol``, execution in
``pteforge.runtime.RuntimePool``, artifact lookup behind ``ArtifactResolver``. The routes
are plain module-level functions reaching the runtime through ``app.state.inference``.
"""

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

from fastapi import APIRouter, FastAPI
from prometheus_client import CollectorRegistry

from pteforge.runtime import RuntimePool
from pteforge.server.inference import routes_infer, routes_models
from pteforge.server.inference.bodies import DEFAULT_MAX_REQUEST_BYTES
from pteforge.server.inference.dependencies import (
    DEFAULT_RESOLVE_TTL_S,
    Authenticate,
    InferenceState,
    new_inference_state,
)
from pteforge.server.inference.resolver import ArtifactResolver

router = APIRouter()
"""Every /v2 route and ``/metrics``; the app's lifespan must set ``app.state.inference``."""
router.include_router(routes_models.router)
router.include_router(routes_infer.router)


@asynccontextmanager
async def _serving(state: InferenceState, app: FastAPI) -> AsyncIterator[None]:
    app.state.inference = state
    try:
        yield
    finally:
        del app.state.inference


def build_inference_router(
    resolver: ArtifactResolver,
    pool: RuntimePool,
    auth: Authenticate,
    registry: CollectorRegistry,
    *,
    server_version: str = "0",
    resolve_ttl_s: float = DEFAULT_RESOLVE_TTL_S,
    clock: Callable[[], float] = time.monotonic,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
) -> APIRouter:
    """``router`` for an app of its own (benchmarks, runtime tests): its lifespan sets the
    ``new_inference_state`` of these arguments (see there) as ``app.state.inference`` of the
    app that includes it, while that app runs. The caller closes ``pool``."""
    state = new_inference_state(
        resolver, pool, auth, registry,
        server_version=server_version, resolve_ttl_s=resolve_ttl_s, clock=clock,
        max_request_bytes=max_request_bytes,
    )  # fmt: skip
    standalone = APIRouter(lifespan=partial(_serving, state))
    standalone.include_router(router)
    return standalone
