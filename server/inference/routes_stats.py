"""The protocol's statistics extension: ``GET /v2/models/stats``, ``/v2/models/{model}/stats``
and ``/v2/models/{model}/versions/{version}/stats`` (Triton's shape, see ``statistics``).

Included before the model routes, so that ``/v2/models/stats`` is not read as a model."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from pteforge.server.auth.dependencies import Principal
from pteforge.server.inference.dependencies import Caller, InferenceState, PinnedVersion, State
from pteforge.server.inference.routes_models import TAG
from pteforge.server.inference.sequences import session_scope
from pteforge.server.inference.statuses import answered
from pteforge.server.inference.work import model_statistics

router = APIRouter(tags=[TAG])


@router.get("/v2/models/stats", summary="Infer statistics of all the project's models")
async def all_stats(principal: Caller, state: State) -> Response:
    """The statistics of every model the caller's project has run since the server started."""
    return JSONResponse(state.statistics.answer(session_scope(principal)))


async def _stats(
    state: InferenceState, principal: Principal, model: str, version: str | None
) -> Response:
    return JSONResponse(await model_statistics(state, principal, model, version))


@router.get("/v2/models/{model}/stats", summary="Infer statistics of a model")
@router.get("/v2/models/{model}/versions/{version}/stats", include_in_schema=False)
async def model_stats(
    model: str, version: PinnedVersion, principal: Caller, state: State
) -> Response:
    """Counts and nanoseconds of successful and failed requests and of their phases
    (queue, compute_input, compute_infer, compute_output), per version: the one a request
    named, else the version the model name resolved to (`latest` for an artifact id)."""
    return await answered(state.metrics, "stats", _stats(state, principal, model, version))
