"""Text generation: the one request a caller makes and the one event type streamed back.

The server's OpenAI routes (and any other front end) build a :class:`GenerationRequest`
and hand it to ``RuntimePool.generate_async``, which yields :class:`GenerationEvent` s as
the runtime worker produces them::

    async for event in pool.generate_async(
        sha256, source, request, tokenizer=(tok_sha256, tok_source),
        tokenizer_config=None, sequence=None,
    ):
        ...  # event.text: whole UTF-8; the last event has finish_reason and usage

Everything that reads an upload happens in the confined worker: tokenizing the prompt,
rendering ``messages`` with the tokenizer config's chat template (a sandboxed Jinja2), and
turning token ids back into text. Closing the iterator early (a client that disconnects)
stops the worker's loop at once and frees the worker.

``temperature`` 0 is greedy decoding (argmax): the tokens equal those of an in-process
greedy loop over the same ``.pte``. Otherwise tokens are sampled from the softmax of the
logits divided by ``temperature``, restricted to the smallest set of most likely tokens
whose probability reaches ``top_p``; with ``seed`` the draws repeat exactly.

``logit_bias`` (token id to a number from -100 to 100) is added to the logits before a token
is chosen; ``presence_penalty`` and ``frequency_penalty`` (-2 to 2) lower the logits of the
tokens generated so far, once for having appeared and once per appearance, as OpenAI defines
them. ``logprobs`` (None: off) asks for each generated token's log probability, and for that
many of the most likely tokens at its step beside it (OpenAI's ``logprobs`` and
``top_logprobs``): the log-softmax of the model's logits, before temperature and ``top_p``.

``echo`` (the completions API's) sends the prompt back first: its text (a text prompt as it
came, token ids decoded) and, with ``logprobs``, each prompt token's log probability after
the tokens before it (the first token's is None: nothing predicts it), which is how
evaluation harnesses score a text. ``max_tokens`` may then be 0: the prompt alone is scored.

``ignore_eos`` (vLLM's extension) keeps generating past end-of-sequence tokens: the text
ends at ``max_tokens``, a stop string or the context only.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator

from pteforge.contracts.json_types import Contract, at_most_entries

MAX_TEMPLATE_KWARGS = 32
"""Most variables a request may add to the chat template's."""

MAX_CHAT_MESSAGES = 2048
"""Most messages a chat may hold (a request's whole conversation)."""

MAX_TOKEN_ID = 2**31 - 1
"""The largest token id a prompt may hold (vocabularies are far smaller; the vocabulary's own
size is checked where the model is known)."""

MAX_LOGIT_BIAS = 300
"""Most token ids a request may bias (OpenAI's limit)."""

MAX_TOP_LOGPROBS = 20
"""Most alternatives a request may ask for at each token (OpenAI's ``top_logprobs`` limit)."""

FinishReason = Literal["stop", "length"]
"""Why generation ended: ``stop`` (an end-of-sequence token or a stop string), ``length``
(``max_tokens`` reached, or the model's context is full)."""


class ChatMessage(Contract):
    """One message of a chat, as the chat template sees it."""

    role: str = Field(min_length=1, max_length=64)
    content: str


class GenerationRequest(Contract):
    """What to generate from: exactly one of ``prompt`` (text, tokenized with the
    tokenizer's own special-token rules), ``prompt_ids`` (token ids, used as they are) or
    ``messages`` (rendered by the chat template, with the generation prompt appended, then
    tokenized); and how.

    ``stop``: strings that end generation where they first appear (the text returned stops
    before them). ``session``: an optional key under which a multi-turn session keeps the
    model's KV cache between requests (a later request whose prompt starts with the
    tokens already in the cache only computes the new ones). ``template_kwargs``: more
    variables for the chat template (``enable_thinking`` for Qwen3's), as
    ``apply_chat_template`` takes them.
    """

    prompt: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    messages: Annotated[tuple[ChatMessage, ...], at_most_entries(MAX_CHAT_MESSAGES)] | None = None
    max_tokens: int = Field(default=16, ge=0, le=1 << 20)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=0, lt=1 << 64)
    stop: tuple[str, ...] = Field(default=(), max_length=16)
    session: str | None = Field(default=None, min_length=1, max_length=256)
    template_kwargs: Annotated[dict[str, JsonValue], at_most_entries(MAX_TEMPLATE_KWARGS)] = Field(
        default_factory=dict
    )
    logit_bias: Annotated[
        dict[
            Annotated[int, Field(ge=0, le=MAX_TOKEN_ID)], Annotated[float, Field(ge=-100, le=100)]
        ],
        at_most_entries(MAX_LOGIT_BIAS),
    ] = Field(default_factory=dict)
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool = False
    ignore_eos: bool = False

    @model_validator(mode="after")
    def _one_prompt(self) -> GenerationRequest:
        if self.max_tokens == 0 and not self.echo:
            raise ValueError("max_tokens may be 0 only with echo (the prompt scored alone)")
        given = [self.prompt is not None, self.prompt_ids is not None, self.messages is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of prompt, prompt_ids or messages")
        ids = self.prompt_ids
        if ids is not None and (not ids or min(ids) < 0 or max(ids) > MAX_TOKEN_ID):
            raise ValueError(
                f"prompt_ids must be a non-empty list of token ids from 0 to {MAX_TOKEN_ID}"
            )
        if any(not s for s in self.stop):
            raise ValueError("a stop string must not be empty")
        if self.template_kwargs and self.messages is None:
            raise ValueError("template_kwargs are for a chat (messages) only")
        if "messages" in self.template_kwargs:
            raise ValueError("template_kwargs may not replace the messages")
        return self


class Usage(Contract):
    """Token counts of one generation, OpenAI's ``usage``."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class TokenLogprob(Contract):
    """A token (``id``) and its log probability at one step. ``bytes``: the UTF-8 bytes the token
    stands for; ``token``: their text, or ``bytes:`` and their ``\\xNN`` escapes when they
    are not whole UTF-8 (part of a character), as OpenAI writes such a token. ``top``: the
    most likely tokens at that step, most likely first (on a generated token only).
    ``logprob`` is None for an echoed prompt's first token only (nothing predicts it)."""

    id: int
    token: str
    bytes: tuple[int, ...]
    logprob: float | None
    top: tuple[TokenLogprob, ...] = ()


class GenerationEvent(Contract):
    """A piece of the generation: ``text`` is always whole UTF-8 (bytes of a character
    split across tokens wait for its last byte), ``token_ids`` the tokens generated since
    the previous event (an end-of-sequence token included, though it adds no text). The last
    event carries ``finish_reason`` and ``usage``; every other event has neither.
    ``logprobs``: one per token id, in order, when the request asked for them."""

    text: str = ""
    token_ids: tuple[int, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    prompt_tokens: int | None = None
    """The prompt's length in tokens, on the first event once the prompt is read (the echoed
    prompt's last, else the first generated token's): what a stream's running usage counts
    from (``stream_options.continuous_usage_stats``)."""
