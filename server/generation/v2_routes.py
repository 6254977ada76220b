"""Triton's (and KServe's) generate extension over the same engine as the OpenAI routes:
``POST /v2/models/{model}/generate`` and ``/generate_stream`` (and the pinned
``/v2/models/{model}/versions/{version}/...``), where ``{model}`` is a model name whose
version has a tokenizer.

``generate`` answers ``{"model_name", "model_version", "text_output", "finish_reason",
"usage"}`` (the last two are pteforge's extra output fields; ``id`` is echoed when the
request has one); ``generate_stream`` answers server-sent events ``data: {...}`` of the
same object, each ``text_output`` a piece of the text, the last with ``finish_reason`` and
``usage``. Errors are the ``/v2`` shape ``{"error": "..."}``: with their status before the
answer starts, as the last event after (``{"error": "invalid or revoked token"}`` when the
caller's token is revoked mid-stream). Authentication, the model's resolution, project
scoping and limits, sessions (``X-Pteforge-Session``) and the stream plumbing are the OpenAI
routes' own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from pteforge.contracts.generation import GenerationEvent, Usage
from pteforge.server.common.openapi_doc import answers, json_body
from pteforge.server.common.services import get_services
from pteforge.server.generation import streaming
from pteforge.server.generation.completion_objects import Collected
from pteforge.server.generation.errors import OpenAIError, answer_of
from pteforge.server.generation.routes import LEFT, SESSION_HEADER, TAG
from pteforge.server.generation.target import target_of
from pteforge.server.generation.v2_schemas import GenerateBody, parse_generate
from pteforge.server.http.bodies import read_json_body
from pteforge.server.http.departure import unless_client_leaves
from pteforge.server.inference.dependencies import InferenceState, running_state
from pteforge.server.inference.resolver import version_number
from pteforge.server.inference.routes_infer import BareRoute
from pteforge.server.inference.statuses import RequestTooLargeError, error_response

ModelName = Annotated[str, Path(description="A model name from `/v1/models` with a tokenizer")]
_BODY = json_body(
    'A generate request: {"text_input": "...", "parameters": {"max_tokens": 16, ...}}'
)

router = APIRouter(tags=[TAG], route_class=BareRoute)


@dataclass(frozen=True)
class GenerateShape:
    """The answer objects of one generate request."""

    model_name: str
    model_version: str
    request_id: str | None = None

    def _object(self, text: str, usage: Usage | None, finish: str | None) -> dict[str, Any]:
        answer: dict[str, Any] = {} if self.request_id is None else {"id": self.request_id}
        answer.update(model_name=self.model_name, model_version=self.model_version)
        answer["text_output"] = text
        if finish is not None:
            answer.update(finish_reason=finish, usage=None if usage is None else usage.model_dump())
        return answer

    def whole(self, done: Collected) -> dict[str, Any]:
        """The answer of a finished generation."""
        return self._object(done.text, done.usage, done.finish_reason)

    def pieces(self, event: GenerationEvent) -> Iterator[dict[str, Any]]:
        """The stream event of one engine event (none for one with no text yet)."""
        if event.text or event.finish_reason is not None:
            yield self._object(event.text, event.usage, event.finish_reason)


def _failed(exc: Exception) -> dict[str, Any]:
    """The last event of a stream that failed once its answer started."""
    return {"error": answer_of(exc).message}


async def _whole(
    request: Request, state: InferenceState, events: streaming.Events, recheck: streaming.Recheck
) -> Collected | None:
    """The generation gathered whole; None when its client left first (it is cancelled, its
    worker freed, as from a stream)."""
    gather = streaming.collect(events, recheck, state.streams.buffer_bytes)
    return await unless_client_leaves(request.receive, gather)


async def _answer(
    request: Request,
    state: InferenceState,
    shape: GenerateShape,
    events: streaming.Events,
    stream: bool,
    recheck: streaming.Recheck,
) -> Response:
    if not stream:
        whole = await _whole(request, state, events, recheck)
        return Response(status_code=LEFT) if whole is None else JSONResponse(shape.whole(whole))
    wire = streaming.StreamFormat(shape.pieces, _failed)
    return await streaming.answer_stream(state, events, wire, recheck)


async def _generate(
    request: Request, state: InferenceState, model: str, version: str | None, stream: bool
) -> Response:
    principal = await state.authenticate(request)
    asked = version_number(version)
    with state.memory.holding(principal.project_id) as held:  # the body, while it is read
        raw = await read_json_body(request, RequestTooLargeError, held)  # the /v1 budget
        body: GenerateBody = parse_generate(raw, request.headers.get(SESSION_HEADER))
    store = get_services(request).store
    target = await target_of(state.targets, store, principal.project_id, model, asked)
    shape = GenerateShape(model, str(target.version), body.id)
    events = streaming.start(state, principal.project_id, target, body.generation)
    recheck = partial(state.authenticate, request)  # a revoked token ends the generation
    if stream and body.parameters.stream is False:  # one event: the whole answer
        collected = await _whole(request, state, events, recheck)
        if collected is None:
            return Response(status_code=LEFT)
        whole = shape.whole(collected)
        return StreamingResponse(iter([streaming.sse(whole)]), media_type=streaming.SSE)
    return await _answer(request, state, shape, events, stream, recheck)


def _error(error: OpenAIError) -> Response:
    response = error_response(error.status, error.message)
    response.headers.update(error.headers)
    if error.status == HTTPStatus.UNAUTHORIZED:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


async def _serve(request: Request, model: str, version: str | None, stream: bool) -> Response:
    state = running_state(request)
    if state is None:
        return error_response(503, "the inference runtime is not running")
    try:
        response = await _generate(request, state, model, version, stream)
    except Exception as exc:
        response = _error(answer_of(exc))
    state.metrics.observe_request("generate_stream" if stream else "generate", response.status_code)
    return response


@router.post(
    "/v2/models/{model}/generate",
    summary="Generate text (Triton's generate extension)",
    openapi_extra=_BODY,
)
async def generate(request: Request, model: ModelName) -> Response:
    """Triton's generate extension: `text_input` continued by the latest version of the
    model name `model`, with its tokenizer; `parameters` (or top-level keys) `max_tokens`,
    `temperature` (0 is greedy), `top_p`, `seed`, `stop`. Answers `model_name`,
    `model_version`, `text_output`, `finish_reason` and `usage`. A header
    `X-Pteforge-Session: KEY` keeps the KV cache between turns, as on `/v1/completions`."""
    return await _serve(request, model, None, stream=False)


@router.post(
    "/v2/models/{model}/generate_stream",
    summary="Generate text as server-sent events",
    openapi_extra=_BODY,
    responses=answers(streaming.SSE),
)
async def generate_stream(request: Request, model: ModelName) -> Response:
    """`generate` as server-sent events `data: {...}`, each `text_output` the next piece
    of the text; the last has `finish_reason` and `usage`, or is `{"error": "..."}`."""
    return await _serve(request, model, None, stream=True)


@router.post("/v2/models/{model}/versions/{version}/generate", include_in_schema=False)
async def generate_versioned(request: Request, model: str, version: str) -> Response:
    """``generate`` of a pinned version."""
    return await _serve(request, model, version, stream=False)


@router.post("/v2/models/{model}/versions/{version}/generate_stream", include_in_schema=False)
async def generate_stream_versioned(request: Request, model: str, version: str) -> Response:
    """``generate_stream`` of a pinned version."""
    return await _serve(request, model, version, stream=True)
