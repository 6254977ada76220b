"""The /v2 Open Inference Protocol routes and ``/metrics``, as one router.

Thin HTTP glue: decoding/encoding lives in ``pteforge.runtime.oip_codec``, execution in
``pteforge.runtime.RuntimePool``, artifact lookup behind ``ArtifactResolver``. The routes
are plain module-level functions reaching the runtime through ``app.state.inference``.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import APIRouter, FastAPI

from pteforge.server.inference import routes_infer, routes_models, routes_stats
from pteforge.server.inference.dependencies import InferenceState

router = APIRouter()
"""Every /v2 route and ``/metrics``; the app's lifespan must set ``app.state.inference``."""
router.include_router(routes_stats.router)  # before /v2/models/{model}
router.include_router(routes_models.router)
router.include_router(routes_infer.router)


@asynccontextmanager
async def _serving(state: InferenceState, app: FastAPI) -> AsyncIterator[None]:
    app.state.inference = state
    try:
        yield
    finally:
        del app.state.inference


def build_inference_router(state: InferenceState) -> APIRouter:
    """``router`` for an app of its own (benchmarks, runtime tests): its lifespan sets
    ``state`` (from ``new_inference_state``) as ``app.state.inference`` of the app that
    includes it, while that app runs. The caller closes the state's pool."""
    standalone = APIRouter(lifespan=partial(_serving, state))
    standalone.include_router(router)
    return standalone
