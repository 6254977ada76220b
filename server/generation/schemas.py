"""The OpenAI request bodies these routes take, checked field by field, and how each becomes
the one :class:`GenerationRequest` of ``contracts/generation.py``.

Fields OpenAI defines but pteforge does not do (``best_of`` above 1, tools, ...) are
refused naming the field when set to anything but their default; a field OpenAI does not
define is refused as OpenAI does ("Unrecognized request argument supplied").
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator

from pteforge.contracts.generation import (
    MAX_CHAT_MESSAGES,
    MAX_LOGIT_BIAS,
    MAX_TEMPLATE_KWARGS,
    MAX_TOKEN_ID,
    MAX_TOP_LOGPROBS,
    ChatMessage,
    GenerationRequest,
)
from pteforge.contracts.json_types import FailFastList, at_most_entries

CHAT_MAX_TOKENS = 1 << 20
"""A chat without ``max_tokens`` runs until the end of the sequence or of the context."""

MAX_CHOICES = 16
"""Most choices one request may ask for (``n`` times the prompts of a batch): each is a
generation that holds a runtime worker in turn."""

MAX_CONTENT_PARTS = 16
"""Most text parts one message's content may have (their texts are joined)."""


class StreamOptions(BaseModel):
    """``stream_options``: ``include_usage`` adds a last chunk with the usage; with it,
    ``continuous_usage_stats`` (vLLM's extension) puts the usage so far in every chunk."""

    model_config = ConfigDict(extra="forbid")

    include_usage: bool = False
    continuous_usage_stats: bool = False


class SamplingFields(BaseModel):
    """How to sample, as every text route takes it (the OpenAI bodies and the ``/v2``
    generate parameters): ``temperature`` 0 is greedy."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=0, lt=1 << 64)
    stop: str | FailFastList[str] | None = None
    ignore_eos: bool = False
    """vLLM's extension: past end-of-sequence tokens, up to ``max_tokens`` (for benchmarks)."""

    UNSUPPORTED: ClassVar[dict[str, tuple[object, ...]]] = {}
    """Fields pteforge takes only at these values (OpenAI's defaults)."""

    def unsupported(self) -> str | None:
        """The first field set to a value pteforge does not do, or None."""
        for name, allowed in self.UNSUPPORTED.items():
            if getattr(self, name) not in allowed:
                return name
        return None

    def stops(self) -> tuple[str, ...]:
        """``stop`` as a tuple of strings."""
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def sampling(self, max_tokens: int) -> dict[str, Any]:
        """The sampling fields of a :class:`GenerationRequest`."""
        return {
            "max_tokens": max_tokens,
            "temperature": 1.0 if self.temperature is None else self.temperature,
            "top_p": 1.0 if self.top_p is None else self.top_p,
            "seed": self.seed,
            "stop": self.stops(),
            "ignore_eos": self.ignore_eos,
        }


class _Sampling(SamplingFields):
    """The fields both OpenAI endpoints share."""

    model: str = Field(min_length=1, max_length=200)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=1, ge=1, le=MAX_CHOICES)
    user: str | None = None
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    logit_bias: (
        Annotated[
            dict[str, Annotated[float, Field(ge=-100, le=100)]], at_most_entries(MAX_LOGIT_BIAS)
        ]
        | None
    ) = None
    return_token_ids: bool = False
    """pteforge's extension (as vLLM's): each choice carries the ``token_ids`` generated."""

    def each_n(self, requests: list[GenerationRequest]) -> list[GenerationRequest]:
        """``n`` generations of each request, in choice order: with a ``seed``, the j-th of
        each draws from ``seed + j`` (the first one is what ``n`` 1 gives)."""
        n = self.n or 1
        return [
            one
            if j == 0 or one.seed is None
            else one.model_copy(update={"seed": (one.seed + j) % (1 << 64)})
            for one in requests
            for j in range(n)
        ]

    @field_validator("logit_bias")
    @classmethod
    def _token_ids(cls, bias: dict[str, float] | None) -> dict[str, float] | None:
        bad = next((k for k in bias or {} if not _token_id(k)), None)
        if bad is not None:
            raise ValueError(
                f"keys are token ids from 0 to {MAX_TOKEN_ID} (no leading zero), not {bad[:40]!r}"
            )
        return bias

    def sampling(self, max_tokens: int) -> dict[str, Any]:
        """The sampling fields of a :class:`GenerationRequest`, bias and penalties too."""
        return {
            **super().sampling(max_tokens),
            "logit_bias": {int(k): v for k, v in (self.logit_bias or {}).items()},
            "presence_penalty": self.presence_penalty or 0.0,
            "frequency_penalty": self.frequency_penalty or 0.0,
        }

    def include_usage(self) -> bool:
        """Whether a stream ends with a usage chunk."""
        return self.stream_options is not None and self.stream_options.include_usage

    def continuous_usage(self) -> bool:
        """Whether every chunk carries the usage so far (with ``include_usage``, as vLLM)."""
        options = self.stream_options
        return options is not None and options.include_usage and options.continuous_usage_stats


def _token_id(key: str) -> bool:
    """Whether ``key`` is a token id in decimal ASCII digits, written once: no leading zero
    ("07" and "7" would be one token biased twice, the last silently winning)."""
    digits = 0 < len(key) <= 10 and key.isascii() and key.isdigit()
    return digits and (key == "0" or key[0] != "0") and int(key) <= MAX_TOKEN_ID


class CompletionBody(_Sampling):
    """``POST /v1/completions``: ``prompt`` is text or token ids, or a batch of either."""

    prompt: str | FailFastList[int] | FailFastList[str] | FailFastList[FailFastList[int]]
    """Text ("" is a prompt too: the tokenizer's BOS alone, where it adds one), or token ids."""
    echo: bool | None = False
    """The prompt first, with its tokens' logprobs when ``logprobs`` is set."""
    max_tokens: int | None = Field(default=16, ge=0, le=CHAT_MAX_TOKENS)
    """0 only with ``echo``: the prompt alone, scored (how evaluation harnesses ask)."""
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    """Each token's logprob, and this many of the most likely tokens at its step."""
    best_of: int | None = 1
    suffix: str | None = None

    UNSUPPORTED: ClassVar[dict[str, tuple[object, ...]]] = {
        **_Sampling.UNSUPPORTED,
        "best_of": (None, 1),
        "suffix": (None, ""),
    }

    @field_validator("max_tokens")
    @classmethod
    def _none_only_with_echo(cls, tokens: int | None, info: ValidationInfo) -> int | None:
        if tokens == 0 and not info.data.get("echo"):
            raise ValueError("0 only with echo (the prompt scored alone); 1 or more otherwise")
        return tokens

    def generations(self, session: str | None = None) -> list[GenerationRequest]:
        """The generations this body asks for: ``n`` of each prompt, in choice order."""
        tokens = 16 if self.max_tokens is None else self.max_tokens
        fields: dict[str, Any] = {"session": session, "logprobs": self.logprobs}
        return self.each_n(
            [
                GenerationRequest(**source, **self.sampling(tokens), **fields, echo=bool(self.echo))
                for source in _prompts(self.prompt)
            ]
        )


def _prompts(prompt: str | list[int] | list[str] | list[list[int]]) -> list[dict[str, Any]]:
    """Each prompt of ``prompt`` (one text, one list of token ids, or a batch of either) as
    :class:`GenerationRequest` fields."""
    batch: list[Any] = [prompt] if isinstance(prompt, str) or _ids(prompt) else list(prompt)
    if not 0 < len(batch) <= MAX_CHOICES:
        raise ValueError(f"a batch of prompts has 1 to {MAX_CHOICES} prompts, not {len(batch)}")
    for one in batch:
        if isinstance(one, list) and not one:
            raise ValueError("a prompt of token ids needs at least one token")
        if isinstance(one, list) and not 0 <= min(one) <= max(one) <= MAX_TOKEN_ID:
            raise ValueError(f"a prompt's token ids are from 0 to {MAX_TOKEN_ID}")
    return [{"prompt": one} if isinstance(one, str) else {"prompt_ids": one} for one in batch]


def _ids(prompt: list[Any]) -> bool:
    """Whether ``prompt`` is one prompt of token ids (not a batch)."""
    return bool(prompt) and all(isinstance(t, int) for t in prompt)


class TextPart(BaseModel):
    """A text part of a message's content."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["text"]
    text: str


class Message(BaseModel):
    """One chat message: its content is text or text parts."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "developer", "user", "assistant"]
    content: Annotated[str | FailFastList[TextPart], at_most_entries(MAX_CONTENT_PARTS)]
    name: str | None = None

    def as_chat(self) -> ChatMessage:
        """The message as the chat template sees it."""
        content = self.content
        text = content if isinstance(content, str) else "".join(p.text for p in content)
        return ChatMessage(role=self.role, content=text)


class ChatBody(_Sampling):
    """``POST /v1/chat/completions``."""

    messages: Annotated[list[Message], at_most_entries(MAX_CHAT_MESSAGES)] = Field(
        min_length=1, fail_fast=True
    )
    max_tokens: int | None = Field(default=None, ge=1, le=CHAT_MAX_TOKENS)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=CHAT_MAX_TOKENS)
    logprobs: bool | None = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    tools: list[Any] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    store: bool | None = None
    metadata: Annotated[dict[str, str], at_most_entries(16)] | None = None
    """Kept with a stored completion; nothing is stored here (``store`` is false), as OpenAI
    takes it then."""
    service_tier: str | None = None
    modalities: list[str] | None = None
    reasoning_effort: str | None = None
    prediction: Any = None
    audio: Any = None
    web_search_options: Any = None
    chat_template_kwargs: (
        Annotated[dict[str, JsonValue], at_most_entries(MAX_TEMPLATE_KWARGS)] | None
    ) = None
    """vLLM's and SGLang's extension: more variables for the chat template."""

    UNSUPPORTED: ClassVar[dict[str, tuple[object, ...]]] = {
        **_Sampling.UNSUPPORTED,
        "tools": (None, []),
        "tool_choice": (None, "none"),
        "response_format": (None, {"type": "text"}),
        "store": (None, False),
        "service_tier": (None, "auto", "default"),
        "modalities": (None, ["text"]),
        "reasoning_effort": (None,),
        "prediction": (None,),
        "audio": (None,),
        "web_search_options": (None,),
    }

    def generations(self, session: str | None = None) -> list[GenerationRequest]:
        """The generations this body asks for: ``n`` answers to the chat."""
        tokens = self.max_completion_tokens or self.max_tokens or CHAT_MAX_TOKENS
        messages = tuple(m.as_chat() for m in self.messages)
        extra = self.chat_template_kwargs or {}
        chat = GenerationRequest(
            messages=messages,
            **self.sampling(tokens),
            session=session,
            template_kwargs=extra,
            logprobs=(self.top_logprobs or 0) if self.logprobs else None,
        )
        return self.each_n([chat])

    @field_validator("top_logprobs")
    @classmethod
    def _with_logprobs(cls, top: int | None, info: ValidationInfo) -> int | None:
        if top is not None and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs set to true")
        return top
