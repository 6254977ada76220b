"""The /v2 Open Inference Protocol feature of the server: ``build_inference_router``.

Mounting it (the server owns the pool's lifetime, the resolver and the auth function, an
async function of the request returning the caller: see ``cached_principal``)::

    from prometheus_client import CollectorRegistry
    from pteforge.runtime import RuntimePool
    from pteforge.runtime.native import NativeBuildError, build_xnnpack_options

    try:
        shim = build_xnnpack_options(home / "native")   # XNNPACK weight cache on
    except NativeBuildError:
        shim = None                                       # runs, without the cache
    pool = RuntimePool(workers, cache_bytes, home / "runtime-artifacts",
                       weight_cache_library=shim)
    app.include_router(build_inference_router(resolver, pool, principal_of, registry))
    ...
    pool.close()  # on shutdown
"""

from pteforge.server.inference.resolver import ArtifactResolver, ResolvedArtifact
from pteforge.server.inference.routes import build_inference_router

__all__ = ["ArtifactResolver", "ResolvedArtifact", "build_inference_router"]
