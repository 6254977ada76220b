"""The /v2 Open Inference Protocol feature of the server.

The app includes ``router`` when it is created; its lifespan starts the runtime pool and
sets the routes' state, closing the pool on shutdown (see ``pteforge.server.app``)::

    from pteforge.server.inference import router
    from pteforge.server.inference.startup import start_runtime_pool, store_inference_state

    app.include_router(router)                      # in the factory
    ...
    pool = start_runtime_pool(settings)             # in the lifespan
    app.state.inference = store_inference_state(services, pool, registry)
    ...
    pool.close()                                    # on shutdown

An app of its own over any ``ArtifactResolver`` and auth function (benchmarks, runtime
tests) includes ``build_inference_router(new_inference_state(resolver, pool, auth,
registry))`` instead.
"""

from pteforge.server.inference.dependencies import InferenceState, new_inference_state
from pteforge.server.inference.resolver import ArtifactResolver, IndexedVersion, ResolvedArtifact
from pteforge.server.inference.routes import build_inference_router, router

__all__ = [
    "ArtifactResolver",
    "IndexedVersion",
    "InferenceState",
    "ResolvedArtifact",
    "build_inference_router",
    "new_inference_state",
    "router",
]
