"""``POST /v2/models/{model}/infer``: a documented route that skips FastAPI's request solving.

FastAPI's parameter and dependency solving cost about a third of the server's CPU on this
route, so ``BareRoute`` calls its endpoint with the request and the raw path parameters;
the endpoint's signature and ``openapi_extra`` still document it like any other route.
Finding the route cost as much again (FastAPI matches a request against every route
listed before it, twice through each included router), so the app also lists the infer
routes first, undocumented (``front_routes``).
"""

import time
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.routing import Route

from pteforge.runtime.oip_codec import HEADER_LENGTH
from pteforge.server.auth.dependencies import Principal
from pteforge.server.common.openapi_doc import answers
from pteforge.server.http.bodies import read_capped
from pteforge.server.http.memory import HeldBytes
from pteforge.server.http.release import ReleasedWhenSent
from pteforge.server.inference.bodies import content_encoding, header_length
from pteforge.server.inference.dependencies import InferenceState, inference_state
from pteforge.server.inference.routes_models import TAG
from pteforge.server.inference.sequences import session_scope
from pteforge.server.inference.statuses import RequestTooLargeError, answered
from pteforge.server.inference.work import infer as run_infer

INFER_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/octet-stream": {
                "schema": {"type": "string", "format": "binary"},
                "description": "Binary tensor data extension: a JSON header of "
                "`Inference-Header-Content-Length` bytes, then the raw tensors.",
            },
        },
    }
}


async def _call_bare(endpoint: Callable[..., Awaitable[Response]], request: Request) -> Response:
    return await endpoint(request, **request.path_params)


class BareRoute(APIRoute):
    """An ``APIRoute`` whose endpoint is called as ``endpoint(request, **path_params)``: no
    dependencies, no validation (path parameters stay strings), the response as returned."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        return partial(_call_bare, self.endpoint)


router = APIRouter(tags=[TAG], route_class=BareRoute)


class HeldResponse(ReleasedWhenSent):
    """An infer answer that gives back its request's held bytes once it is sent: a slow
    reader's answer still counts in its project's share."""

    def __init__(self, held: HeldBytes, body: bytes, json_length: int | None) -> None:
        if json_length is None:
            super().__init__(body, media_type="application/json")
        else:
            headers = {HEADER_LENGTH: str(json_length)}
            super().__init__(body, media_type="application/octet-stream", headers=headers)
        self.release = held.release


async def _infer(
    state: InferenceState, principal: Principal, request: Request, model: str, version: str | None
) -> Response:
    start = time.perf_counter()
    json_length = header_length(request)
    encoding = content_encoding(request)
    held = state.memory.holding(session_scope(principal))
    try:
        body = await read_capped(request, state.max_request_bytes, RequestTooLargeError, held)
        out, out_json_length, timings = await run_infer(
            state, principal, model, body, encoding, json_length, version, held
        )
    except BaseException:
        held.release()
        raise
    state.metrics.observe_timings(time.perf_counter() - start, timings)
    return HeldResponse(held, out, out_json_length)


async def _serve(request: Request, model: str, version: str | None) -> Response:
    state = inference_state(request)
    principal = await state.authenticate(request)
    running = _infer(state, principal, request, model, version)
    return await answered(state.metrics, "infer", running)


@router.post(
    "/v2/models/{model}/infer",
    summary="Run a method (JSON or binary tensors)",
    openapi_extra=INFER_DOC,
    responses=answers("application/octet-stream"),
)
async def infer(request: Request, model: str) -> Response:
    """Run a method on JSON tensors, or binary tensors (`Inference-Header-Content-Length`);
    `sequence_id`, `sequence_start` and `sequence_end` parameters run it in a session.
    A model name serves its latest version, resolved once when the request starts."""
    return await _serve(request, model, None)


@router.post("/v2/models/{model}/versions/{version}/infer", include_in_schema=False)
async def infer_versioned(request: Request, model: str, version: str) -> Response:
    """``infer`` of a pinned version of a model name (ignored for an artifact id)."""
    return await _serve(request, model, version)


def front_routes(source: APIRouter = router) -> list[Route]:
    """The routes of ``source`` (a router of ``BareRoute`` routes: the infer routes unless
    told) again, undocumented, for the front of the app's route list: the
    same endpoints called the same way (path parameters as strings; errors to the app's
    handlers), found with one path match instead of a walk through every router before
    /v2 (about 200 us of CPU per call, measured). They skip what ``include_router``
    would add: nothing is added to the /v2 router; an option given there must be given
    here too."""
    infer_routes = [route for route in source.routes if isinstance(route, APIRoute)]
    return [
        Route(
            route.path,
            partial(_call_bare, route.endpoint),
            methods=sorted(route.methods or ()),
            include_in_schema=False,
        )
        for route in infer_routes
    ]
