"""``POST /v1/completions``, ``POST /v1/chat/completions`` and ``POST /v1/responses`` (text
only: the chat's request building, ``responses_body.py``; its answer, ``responses_answer.py``),
OpenAI-compatible.

Each request is authenticated like ``/v2`` (cached bearer tokens), its body checked against
what OpenAI accepts, its ``model`` resolved to a model version's ``.pte`` and tokenizer,
and handed to the runtime pool's generation engine, whose worker tokenizes, runs the
prefill and decode loop and detokenizes (``streaming.py``: a refused prompt is a 400, not
a broken stream; a client that disconnects mid-stream frees its worker at once, and so does
a token revoked mid-stream, whose stream ends with a 401 error event; a slow client never
holds it). Every error is in
OpenAI's shape (``errors.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import JSONResponse, Response

from pteforge.contracts.generation import GenerationRequest
from pteforge.server.common.openapi_doc import answers, json_body
from pteforge.server.common.services import get_services
from pteforge.server.generation import streaming
from pteforge.server.generation.completion_objects import Collected, Shape
from pteforge.server.generation.errors import OpenAIError, answer_of
from pteforge.server.generation.responses_answer import ResponseShape
from pteforge.server.generation.responses_body import ResponsesBody
from pteforge.server.generation.schemas import MAX_CHOICES, ChatBody, CompletionBody
from pteforge.server.generation.target import parse_model, target_of
from pteforge.server.http.bodies import read_json_body
from pteforge.server.http.departure import unless_client_leaves
from pteforge.server.http.memory import HeldBytes
from pteforge.server.inference.dependencies import inference_state
from pteforge.server.inference.routes_infer import BareRoute
from pteforge.server.inference.statuses import RequestTooLargeError

TAG = "generation"
SESSION_HEADER = "X-Pteforge-Session"
"""An optional header naming a multi-turn session whose KV cache is kept between turns."""

DONE = b"data: [DONE]\n\n"
"""The last event of an OpenAI stream."""
LEFT = 499
"""The status logged for a request whose client left before its answer (nginx's)."""

Body = CompletionBody | ChatBody | ResponsesBody
Whole = Callable[[Sequence[Collected]], dict[str, Any]]
"""The answer object of finished generations, one a choice."""
Wire = Callable[[int, int], streaming.StreamFormat]
"""How choice ``index`` of ``count`` (the arguments) is streamed."""

# Each route answers a JSON object, or server-sent events when the body asks for a stream.
router = APIRouter(tags=[TAG], route_class=BareRoute, responses=answers(streaming.SSE))


async def _parse(
    request: Request, body_type: type[Body], held: HeldBytes
) -> tuple[Body, list[GenerationRequest]]:
    raw = await read_json_body(request, RequestTooLargeError, held)
    body = body_type.model_validate_json(raw)
    field = body.unsupported()
    if field is not None:
        raise OpenAIError(400, f"{field!r} is not supported by pteforge: leave it out", field)
    session = request.headers.get(SESSION_HEADER)
    try:
        generations = body.generations(session)
    except ValidationError:
        raise  # answered naming its field
    except ValueError as exc:
        raise OpenAIError(400, str(exc), "prompt") from None
    return body, _check_choices(body, generations, session)


def _check_choices(
    body: Body, generations: list[GenerationRequest], session: str | None
) -> list[GenerationRequest]:
    """Several choices (``n``, a batch of prompts) run one after another."""
    if len(generations) > MAX_CHOICES:
        raise OpenAIError(
            400,
            f"at most {MAX_CHOICES} choices a request: n times the prompts is {len(generations)}",
            "n",
        )
    if len(generations) > 1 and session is not None:
        raise OpenAIError(
            400, f"a session ({SESSION_HEADER}) holds one conversation: ask for one choice", "n"
        )
    return generations


def _failed(exc: Exception) -> dict[str, Any]:
    """The last event of a stream that failed once its answer started."""
    return answer_of(exc).body()


async def _generate(request: Request, body_type: type[Body]) -> Response:
    state = inference_state(request)
    principal = await state.authenticate(request)
    with state.memory.holding(principal.project_id) as held:  # the body, while it is read
        body, generations = await _parse(request, body_type, held)
    store = get_services(request).store
    target = await target_of(state.targets, store, principal.project_id, *parse_model(body.model))
    whole, wire = _format(body, generations)
    recheck = partial(state.authenticate, request)  # a revoked token ends the generation
    count = len(generations)

    def choice(index: int) -> streaming.Events:
        return streaming.start(state, principal.project_id, target, generations[index])

    if not body.stream:  # a client that leaves frees the worker, as from a stream
        bound = state.streams.buffer_bytes
        gather = streaming.collect_choices(choice, count, recheck, bound)
        done = await unless_client_leaves(request.receive, gather)
        return Response(status_code=LEFT) if done is None else JSONResponse(whole(done))
    if count == 1:
        return await streaming.answer_stream(state, choice(0), wire(1, 0), recheck)
    return await streaming.answer_choices(state, choice, count, partial(wire, count), recheck)


def _format(body: Body, generations: list[GenerationRequest]) -> tuple[Whole, Wire]:
    """How the route of ``body`` writes its answer: whole, and streamed."""
    if isinstance(body, ResponsesBody):
        answer = ResponseShape(body)
        return answer.whole, answer.wire
    shape = Shape(
        model=body.model,
        chat=isinstance(body, ChatBody),
        token_ids=body.return_token_ids,
        include_usage=body.include_usage(),
        continuous_usage=body.continuous_usage(),
        logprobs=generations[0].logprobs is not None,
        n=body.n or 1,
    )
    return shape.whole, partial(_wire, shape)


def _wire(shape: Shape, count: int, index: int) -> streaming.StreamFormat:
    """How choice ``index`` of ``count`` is streamed."""
    chunks = partial(shape.chunks, index=index, last=index == count - 1)
    return streaming.StreamFormat(chunks, _failed, shape.opening(index), DONE)


async def _answer(request: Request, body_type: type[Body]) -> Response:
    try:
        return await _generate(request, body_type)
    except Exception as exc:
        return answer_of(exc).response()


@router.post(
    "/v1/completions",
    summary="Complete a prompt (OpenAI-compatible)",
    openapi_extra=json_body("An OpenAI completions body: model, prompt, max_tokens, ..."),
)
async def completions(request: Request) -> Response:
    """OpenAI's completions: `prompt` (text or token ids, or a batch of either) continued by
    the model version `model` names (`name` or `name:version`), with its tokenizer, `n` times
    each. `temperature` 0 is greedy; `echo` sends the prompt back first (with `logprobs`,
    each prompt token's). Errors are OpenAI's `{"error": {"message", "type", "param", "code"}}`."""
    return await _answer(request, CompletionBody)


@router.post(
    "/v1/chat/completions",
    summary="Answer a chat (OpenAI-compatible)",
    openapi_extra=json_body("An OpenAI chat completions body: model, messages, max_tokens, ..."),
)
async def chat_completions(request: Request) -> Response:
    """OpenAI's chat completions: `messages` rendered by the chat template of the version's
    `tokenizer_config` (or the documented default), then continued as in completions."""
    return await _answer(request, ChatBody)


@router.post(
    "/v1/responses",
    summary="Answer with a response (OpenAI's Responses API, text only)",
    openapi_extra=json_body("An OpenAI Responses body: model, input, instructions, ..."),
)
async def responses(request: Request) -> Response:
    """OpenAI's Responses API, text only: `input` (a text, or message items) after
    `instructions`, answered as the chat route answers the same messages, as one `response`
    object or its named events (`stream`). Nothing is stored (`store` true is taken as
    false); tools, `previous_response_id`, reasoning, images, files and `text.format` other
    than text are a 400 naming the field."""
    return await _answer(request, ResponsesBody)
