"""Text generation over the runtime pool's generation engine (``RuntimePool.generate_async``):
OpenAI-compatible ``POST /v1/completions``, ``/v1/chat/completions`` and ``/v1/responses``
(``routes.py``), and Triton's generate extension ``POST /v2/models/{model}/generate[_stream]``
(``v2_routes.py``), as one ``router``."""

from fastapi import APIRouter

from pteforge.server.generation import routes, v2_routes

router = APIRouter()
"""Every text generation route."""
router.include_router(routes.router)
router.include_router(v2_routes.router)

bare_routers = (routes.router, v2_routes.router)
"""The same routes by their own ``BareRoute`` routers (for the app's ``front_routes``)."""

__all__ = ["bare_routers", "router"]
