"""The /v2 health, server and model routes, and ``/metrics``.

Each route reaches the running app's runtime through ``request.app.state.inference`` (see
``dependencies``), so the routes are created once, with the app. A model route's handler also
serves its ``/v2/models/{model}/versions/{version}/...`` twin: a model name's pinned version
(``PinnedVersion``; ignored for an artifact id, which names one immutable artifact).
"""

import hmac
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ValidationError

from pteforge.runtime.errors import ProtocolError
from pteforge.runtime.oip_codec import model_metadata
from pteforge.server.auth.dependencies import Principal, bearer_token
from pteforge.server.http.bodies import read_capped
from pteforge.server.inference.dependencies import (
    Caller,
    InferenceState,
    PinnedVersion,
    State,
    inference_state,
    running_state,
)
from pteforge.server.inference.model_config import config_json, model_config
from pteforge.server.inference.repository import SERVED_EXTENSIONS, load_model, repository_index
from pteforge.server.inference.statuses import RequestTooLargeError, answered
from pteforge.server.inference.work import check_ready, model_of

TAG = "inference (Open Inference Protocol v2)"

router = APIRouter(tags=[TAG])


class ServerMetadata(BaseModel):
    """KServe v2 server metadata: ``GET /v2``."""

    name: str
    version: str
    extensions: list[str]


@router.get("/v2/health/live", summary="Liveness (no token needed)")
async def live() -> dict[str, bool]:
    """The server process answers."""
    return {"live": True}


@router.get("/v2/health/ready", summary="Readiness (no token needed)")
async def ready(request: Request) -> Any:
    """200 once the runtime pool can serve, else 503."""
    state = running_state(request)
    if state is None or not state.pool.ready:
        return JSONResponse({"ready": False}, status_code=503)
    return {"ready": True}


@router.get("/v2", summary="Server metadata")
async def server_metadata(principal: Caller, state: State) -> ServerMetadata:
    """Name, version and the protocol extensions served."""
    extensions = list(SERVED_EXTENSIONS)
    return ServerMetadata(name="pteforge", version=state.server_version, extensions=extensions)


class IndexRequest(BaseModel):
    """The body of ``POST /v2/repository/index`` (optional): ``ready`` lists only the
    models that can run here; pteforge has one repository, so its name is ignored."""

    repository_name: str = ""
    ready: bool = False


_INDEX_SCHEMA = IndexRequest.model_json_schema()


async def _index(request: Request, state: InferenceState, principal: Principal) -> Response:
    raw = await read_capped(request, 64 * 1024, RequestTooLargeError)
    try:
        asked = IndexRequest.model_validate_json(raw) if raw.strip() else IndexRequest()
    except ValidationError as exc:
        raise ProtocolError(f"the index request is not {{'ready': bool}}: {exc}") from None
    entries = await repository_index(state, principal, asked.ready)
    return JSONResponse([asdict(entry) for entry in entries])


@router.post(
    "/v2/repository/index",
    summary="The caller's models (Triton's repository index)",
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": _INDEX_SCHEMA}}}},
)
async def index(request: Request, principal: Caller, state: State) -> Response:
    """Each method of each version of the caller's model names, as `/v2` names it
    (`{name}.{method}`), with its `state` (`READY`, or `UNAVAILABLE` and the `reason`)."""
    return await answered(state.metrics, "index", _index(request, state, principal))


class LoadRequest(BaseModel):
    """The body of ``POST /v2/repository/models/{model}/load`` (optional): Triton's
    ``parameters`` (its ``config`` and ``file:`` overrides are refused)."""

    parameters: dict[str, Any] = {}


async def _load(
    request: Request, state: InferenceState, principal: Principal, model: str
) -> Response:
    raw = await read_capped(request, 64 * 1024, RequestTooLargeError)
    try:
        asked = LoadRequest.model_validate_json(raw) if raw.strip() else LoadRequest()
    except ValidationError as exc:
        raise ProtocolError(f"the load request is not {{'parameters': {{...}}}}: {exc}") from None
    await load_model(state, principal, model, asked.parameters)
    return JSONResponse({})


@router.post(
    "/v2/repository/models/{model}/load",
    summary="Load a model (Triton's extension)",
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": LoadRequest.model_json_schema()}}
        }
    },
)
async def load(request: Request, model: str, principal: Caller, state: State) -> Response:
    """200 once the model can run (it loads on demand, at its first request); 404 for a
    model the caller lacks, 422 for one this host cannot run, 400 for Triton's `config` or
    `file:` overrides (models are served as stored). There is no unload."""
    return await answered(state.metrics, "load", _load(request, state, principal, model))


async def _metadata(
    state: InferenceState, principal: Principal, model: str, version: str | None
) -> Response:
    artifact, signature = await model_of(state, principal, model, version)
    return JSONResponse(model_metadata(model, signature, artifact.version))


@router.get("/v2/models/{model}", summary="Model metadata of `{artifact_id}.{method}`")
@router.get("/v2/models/{model}/versions/{version}", include_in_schema=False)
async def metadata(model: str, version: PinnedVersion, principal: Caller, state: State) -> Response:
    """The inputs and outputs of a method (`-1` for dynamic dimensions)."""
    answer = _metadata(state, principal, model, version)
    return await answered(state.metrics, "metadata", answer)


async def _config(
    state: InferenceState, principal: Principal, model: str, version: str | None
) -> Response:
    artifact, signature = await model_of(state, principal, model, version)
    return JSONResponse(config_json(model_config(model, signature, artifact.version)))


@router.get("/v2/models/{model}/config", summary="Model configuration (Triton's extension)")
@router.get("/v2/models/{model}/versions/{version}/config", include_in_schema=False)
async def config(model: str, version: PinnedVersion, principal: Caller, state: State) -> Response:
    """Triton's `ModelConfig` of a method, as protobuf JSON: `platform` `executorch`,
    `max_batch_size` 0 (no batching across requests), each input and output's `data_type`
    (`TYPE_FP32`) and `dims` (`-1` for dynamic dimensions)."""
    answer = _config(state, principal, model, version)
    return await answered(state.metrics, "config", answer)


async def _ready(
    state: InferenceState, principal: Principal, model: str, version: str | None
) -> Response:
    await check_ready(state, principal, model, version)
    return JSONResponse({"name": model, "ready": True})


@router.get("/v2/models/{model}/ready", summary="Model readiness")
@router.get("/v2/models/{model}/versions/{version}/ready", include_in_schema=False)
async def model_ready(
    model: str, version: PinnedVersion, principal: Caller, state: State
) -> Response:
    """200 when the caller's artifact has that method and it loads; 422 when it cannot run
    here (delegated to a compile-only backend, such as CoreML or Vulkan)."""
    return await answered(state.metrics, "ready", _ready(state, principal, model, version))


@router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def prometheus(request: Request) -> Response:
    """The running app's metrics registry, Prometheus text format; 401 without the metrics
    token where one is set (``PTEFORGE_METRICS_TOKEN``): its series are every project's."""
    state = inference_state(request)
    _check_metrics_token(request, state.metrics_token)
    return Response(generate_latest(state.registry), media_type=CONTENT_TYPE_LATEST)


def _check_metrics_token(request: Request, expected: str | None) -> None:
    if expected is None:
        return
    given = bearer_token(request.headers.get("authorization"))
    if given is None or not hmac.compare_digest(given.encode(), expected.encode()):
        detail = "/metrics needs the metrics token (PTEFORGE_METRICS_TOKEN)"
        raise HTTPException(401, detail, headers={"WWW-Authenticate": "Bearer"})
