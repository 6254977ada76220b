"""The request body of Triton's generate extension, checked, as one :class:`GenerationRequest`.

``{"text_input": "...", "parameters": {"max_tokens": 16, "temperature": 0, ...}}``; as
Triton does, a top-level key other than ``text_input``, ``parameters`` and ``id`` is taken as
a parameter too (``{"text_input": "...", "max_tokens": 16}``). The sampling parameters are
the OpenAI routes' (:class:`SamplingFields`), so they are checked alike; an unknown
parameter, or one given both ways, is refused naming it (a 400 in the ``/v2`` error shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pteforge.contracts.generation import GenerationRequest
from pteforge.server.generation.errors import OpenAIError
from pteforge.server.generation.schemas import CHAT_MAX_TOKENS, SamplingFields

DEFAULT_MAX_TOKENS = 16
"""``max_tokens`` when a request gives none (as the OpenAI completions route)."""


class GenerateParameters(SamplingFields):
    """The parameters a generate request takes: ``max_tokens``, ``temperature``, ``top_p``,
    ``seed``, ``stop``, ``ignore_eos`` and ``stream`` (``false`` makes ``generate_stream``
    send the whole answer as its one event; ``generate`` always answers once)."""

    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1, le=CHAT_MAX_TOKENS)
    stream: bool | None = None


class _Body(BaseModel):
    """The body as sent: extra keys are parameters."""

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(default=None, max_length=256)
    text_input: str  # "" is a prompt too: the BOS token alone, where the tokenizer adds one
    parameters: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class GenerateBody:
    """A checked generate request: its id (echoed), its parameters, what to generate."""

    id: str | None
    parameters: GenerateParameters
    generation: GenerationRequest


def _problem(exc: ValidationError, what: str) -> OpenAIError:
    """A 400 naming the first problem of ``exc``, in a request of ``what``."""
    error = exc.errors()[0]
    loc = [str(part) for part in error.get("loc", ())]
    name = loc[0] if loc else None
    if error.get("type") == "json_invalid":
        return OpenAIError(400, "the request body is not valid JSON")
    if what == "parameter" and error.get("type") == "extra_forbidden":
        accepted = ", ".join(GenerateParameters.model_fields)
        return OpenAIError(400, f"unknown parameter {name!r} (accepted: {accepted})", name)
    where = f"{what} {'.'.join(loc)!r}" if loc else "the request body"
    return OpenAIError(400, f"{where}: {error.get('msg', 'invalid')}", name)


def _parameters(body: _Body) -> GenerateParameters:
    extra = body.model_extra or {}
    twice = sorted(set(extra) & set(body.parameters))
    if twice:
        message = f"parameter {twice[0]!r} is given both in 'parameters' and at the top level"
        raise OpenAIError(400, message, twice[0])
    try:
        return GenerateParameters.model_validate({**body.parameters, **extra})
    except ValidationError as exc:
        raise _problem(exc, "parameter") from None


def parse_generate(raw: bytes, session: str | None) -> GenerateBody:
    """The generate request in ``raw`` (JSON), in the session ``session`` (or none)."""
    try:
        body = _Body.model_validate_json(raw)
    except ValidationError as exc:
        raise _problem(exc, "field") from None
    parameters = _parameters(body)
    sampling = parameters.sampling(parameters.max_tokens)
    try:
        generation = GenerationRequest(prompt=body.text_input, **sampling, session=session)
    except ValidationError as exc:
        raise _problem(exc, "parameter") from None
    return GenerateBody(body.id, parameters, generation)
