"""``POST /v1/completions`` and ``POST /v1/chat/completions``, OpenAI-compatible.

Each request is authenticated like ``/v2`` (cached bearer tokens), its body checked against
what OpenAI accepts, its ``model`` resolved to a model version's ``.pte`` and tokenizer,
and handed to the runtime pool's generation engine, whose worker tokenizes, runs the
prefill and decode loop and detokenizes. A stream's first event is awaited before the
answer starts, so a refused prompt (longer than the context) is a 400, not a broken
stream; a client that disconnects mid-stream closes the engine's iterator, which frees
its worker at once. Every error is in OpenAI's shape (``errors.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

import anyio
from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response, StreamingResponse

from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.server.common.services import get_services
from pteforge.server.generation.errors import OpenAIError, as_openai
from pteforge.server.generation.responses import Collected, Shape
from pteforge.server.generation.schemas import ChatBody, CompletionBody
from pteforge.server.generation.target import Target, resolve_target
from pteforge.server.inference.bodies import read_body
from pteforge.server.inference.dependencies import InferenceState, inference_state
from pteforge.server.inference.routes_infer import BareRoute

log = logging.getLogger(__name__)

TAG = "generation"
SESSION_HEADER = "X-Pteforge-Session"
"""An optional header naming a multi-turn session whose KV cache is kept between turns."""

Events = AsyncGenerator[GenerationEvent, None]


def _doc(what: str) -> dict[str, Any]:
    schema = {"type": "object", "description": what}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


async def _parse(
    request: Request, state: InferenceState, body_type: type[CompletionBody | ChatBody]
) -> tuple[CompletionBody | ChatBody, GenerationRequest]:
    body = body_type.model_validate_json(await read_body(request, state.max_request_bytes))
    field = body.unsupported()
    if field is not None:
        raise OpenAIError(400, f"{field!r} is not supported by pteforge: leave it out", field)
    try:
        return body, body.generation(request.headers.get(SESSION_HEADER))
    except ValidationError:
        raise  # answered naming its field
    except ValueError as exc:
        raise OpenAIError(400, str(exc), "prompt") from None


def _start(
    state: InferenceState, project_id: str, target: Target, generation: GenerationRequest
) -> Events:
    """The engine's events; a session key names a session among the project's only."""
    sha256, source = target.program
    return state.pool.generate_async(
        sha256,
        source,
        generation,
        tokenizer=target.tokenizer,
        tokenizer_config=target.tokenizer_config,
        scope=project_id,
    )


async def _close(events: Events) -> None:
    """Close the engine's iterator even from a cancelled task (a client that went away)."""
    with anyio.CancelScope(shield=True):
        await events.aclose()


def _data(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def _stream(shape: Shape, first: GenerationEvent, events: Events, usage: bool) -> Any:
    try:
        for chunk in shape.opening():
            yield _data(chunk)
        event: GenerationEvent | None = first
        while event is not None:
            for chunk in shape.chunks(event):
                yield _data(chunk)
            if event.finish_reason is not None:
                if usage and event.usage is not None:
                    yield _data(shape.usage_chunk(event.usage))
                break
            event = await anext(events, None)
    except Exception as exc:  # the answer has started: the error becomes the last event
        yield _data(_openai_error(exc).body())
    finally:
        await _close(events)
    yield b"data: [DONE]\n\n"


async def _whole(shape: Shape, events: Events) -> Response:
    done = Collected()
    try:
        async for event in events:
            done.add(event)
    finally:
        await _close(events)
    return JSONResponse(shape.whole(done))


def _openai_error(exc: Exception) -> OpenAIError:
    answer = as_openai(exc)
    if answer is None:
        log.error("generation failed", exc_info=exc)
        return OpenAIError(500, f"internal error ({type(exc).__name__})")
    return answer


async def _generate(request: Request, body_type: type[CompletionBody | ChatBody]) -> Response:
    state = inference_state(request)
    principal = await state.authenticate(request)
    body, generation = await _parse(request, state, body_type)
    store = get_services(request).store
    target = await run_in_threadpool(resolve_target, store, principal.project_id, body.model)
    shape = Shape(model=body.model, chat=body_type is ChatBody, token_ids=body.return_token_ids)
    events = _start(state, principal.project_id, target, generation)
    if not body.stream:
        return await _whole(shape, events)
    try:
        first = await anext(events)
    except BaseException:
        await _close(events)
        raise
    stream = _stream(shape, first, events, body.include_usage())
    return StreamingResponse(stream, media_type="text/event-stream")


async def _answer(request: Request, body_type: type[CompletionBody | ChatBody]) -> Response:
    try:
        return await _generate(request, body_type)
    except Exception as exc:
        return _openai_error(exc).response()


async def completions(request: Request) -> Response:
    """OpenAI's completions: `prompt` (text or token ids) continued by the model version
    `model` names (`name` or `name:version`), with its tokenizer. `temperature` 0 is greedy.
    Errors are OpenAI's `{"error": {"message", "type", "param", "code"}}`."""
    return await _answer(request, CompletionBody)


async def chat_completions(request: Request) -> Response:
    """OpenAI's chat completions: `messages` rendered by the chat template of the version's
    `tokenizer_config` (or the documented default), then continued as in completions."""
    return await _answer(request, ChatBody)


router = APIRouter(tags=[TAG], route_class=BareRoute)
router.add_api_route(
    "/v1/completions",
    completions,
    methods=["POST"],
    summary="Complete a prompt (OpenAI-compatible)",
    openapi_extra=_doc("An OpenAI completions body: model, prompt, max_tokens, ..."),
    responses={200: {"content": {"text/event-stream": {}}}},
)
router.add_api_route(
    "/v1/chat/completions",
    chat_completions,
    methods=["POST"],
    summary="Answer a chat (OpenAI-compatible)",
    openapi_extra=_doc("An OpenAI chat completions body: model, messages, max_tokens, ..."),
    responses={200: {"content": {"text/event-stream": {}}}},
)
