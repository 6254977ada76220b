"""The body of OpenAI's Responses API (``POST /v1/responses``), text only, checked field by
field and made into the chat route's body (:class:`ChatBody`): one request building, chat
template and set of limits for both routes.

``input`` is a text (one user message) or a list of message items (``role`` and
``content``: a text or ``input_text``/``output_text`` parts; ``"type": "message"`` or none,
as the ``openai`` package sends either, an earlier answer's output item included);
``instructions`` is a system message placed first. What would change the answer and is not
text generation (tools, ``previous_response_id``, reasoning, images and files,
``text.format`` other than text, background mode, ...) is refused naming the field.

Nothing is stored: ``store`` true (OpenAI's default) is taken as false, as vLLM does unless it
is told to store, and the answer says ``"store": false``.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from pteforge.contracts.generation import MAX_CHAT_MESSAGES, GenerationRequest
from pteforge.contracts.json_types import FailFastList, at_most_entries
from pteforge.server.generation.schemas import (
    CHAT_MAX_TOKENS,
    MAX_CONTENT_PARTS,
    ChatBody,
    Message,
    SamplingFields,
    TextPart,
)

TEXT_PARTS = ("input_text", "output_text")
"""The content parts pteforge reads: text only."""

NOT_STORED = (
    "an 'item_reference' names a stored item, and pteforge stores nothing (its answers say "
    '"store": false): send the item itself (the Vercel AI SDK does with providerOptions '
    "{openai: {store: false}})"
)
"""Why an ``item_reference`` is refused: the Vercel AI SDK sends one for each earlier answer
of a chat unless told that nothing is stored."""

NO_REASONING = "reasoning.encrypted_content"
"""The one ``include`` entry taken: an answer holds no reasoning item whose content it asks
for (pydantic-ai sends it for a model named as OpenAI's reasoning models, gpt-5 or o3)."""


def _listed(key: str, **fields: str) -> BeforeValidator:
    """A text taken as the list of one ``{key: text, **fields}``: one shape of the field to
    check, so that a refusal names what is wrong in the list, not that it is no text."""
    return BeforeValidator(lambda v: [{key: v, **fields}] if isinstance(v, str) else v)


class InputPart(BaseModel):
    """A text part of an input message: ``input_text``, or an earlier answer's
    ``output_text`` (its ``annotations`` and ``logprobs`` sent back are taken, unread)."""

    model_config = ConfigDict(extra="forbid")

    type: str
    text: str
    annotations: list[Any] | None = None
    logprobs: list[Any] | None = None

    @field_validator("type")
    @classmethod
    def _text_only(cls, kind: str) -> str:
        if kind not in TEXT_PARTS:
            raise ValueError(
                f"pteforge serves text only: a part is {' or '.join(TEXT_PARTS)}, not {kind[:40]!r}"
            )
        return kind


class InputMessage(BaseModel):
    """One message item of ``input``; an earlier answer's output message (with its ``id``
    and ``status``) may be sent back as it came."""

    model_config = ConfigDict(extra="forbid")

    type: str = "message"
    role: Literal["system", "developer", "user", "assistant"]
    content: Annotated[
        FailFastList[InputPart],
        at_most_entries(MAX_CONTENT_PARTS),
        _listed("text", type="input_text"),
    ]
    id: str | None = None
    status: str | None = None

    @field_validator("type")
    @classmethod
    def _messages_only(cls, kind: str) -> str:
        if kind == "item_reference":
            raise ValueError(NOT_STORED)
        if kind != "message":
            raise ValueError(f"pteforge serves text only: an item is a message, not {kind[:40]!r}")
        return kind

    def as_message(self) -> Message:
        """The item as the chat route's message."""
        content = self.content
        return Message(
            role=self.role, content=[TextPart(type="text", text=p.text) for p in content]
        )


class TextFormat(BaseModel):
    """``text.format``: plain text only."""

    model_config = ConfigDict(extra="allow")

    type: str = "text"


class TextOptions(BaseModel):
    """``text``: its ``format`` (``verbosity`` is a hint, taken and unread)."""

    model_config = ConfigDict(extra="forbid")

    format: TextFormat | None = None
    verbosity: str | None = None


class ResponsesBody(SamplingFields):
    """``POST /v1/responses``: the fields of the ``openai`` package's ``responses.create``,
    each taken, or refused naming it unless at a value that changes nothing (``stop`` and
    ``ignore_eos``: the chat route's extensions)."""

    model: str = Field(min_length=1, max_length=200)
    input: Annotated[
        FailFastList[InputMessage],
        Field(min_length=1),
        at_most_entries(MAX_CHAT_MESSAGES),
        _listed("content", role="user"),
    ]
    """A text is one user message."""
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1, le=CHAT_MAX_TOKENS)
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    store: bool | None = None
    metadata: Annotated[dict[str, str], at_most_entries(16)] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    service_tier: str | None = None
    parallel_tool_calls: bool | None = None
    text: TextOptions | None = None
    truncation: str | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    max_tool_calls: int | None = None
    previous_response_id: str | None = None
    conversation: Any = None
    reasoning: dict[str, Any] | None = None
    include: list[Any] | None = None
    background: bool | None = None
    top_logprobs: int | None = None
    prompt: Any = None
    context_management: Any = None

    UNSUPPORTED: ClassVar[dict[str, tuple[object, ...]]] = {
        "tools": (None, []),
        "tool_choice": (None, "none", "auto"),
        "max_tool_calls": (None,),
        "previous_response_id": (None,),
        "conversation": (None,),
        "reasoning": (None, {}, {"effort": None}, {"effort": None, "summary": None}),
        "include": (None, [], [NO_REASONING]),
        "background": (None, False),
        "top_logprobs": (None, 0),
        "prompt": (None,),
        "context_management": (None,),
        "truncation": (None, "disabled"),
        "service_tier": (None, "auto", "default"),
    }

    @field_validator("instructions")
    @classmethod
    def _room_for_instructions(cls, text: str | None, info: ValidationInfo) -> str | None:
        if text is not None and len(info.data.get("input", ())) >= MAX_CHAT_MESSAGES:
            raise ValueError(
                f"a chat holds at most {MAX_CHAT_MESSAGES} messages, instructions one of them"
            )
        return text

    def unsupported(self) -> str | None:
        """The first field set to a value pteforge does not do (``text.format`` other than
        text among them), or None."""
        text_format = self.text.format if self.text is not None else None
        if text_format is not None and text_format.type != "text":
            return "text.format"
        return super().unsupported()

    def chat(self) -> ChatBody:
        """The chat route's body for this one: ``instructions`` first, then the input."""
        first = (
            [] if self.instructions is None else [Message(role="system", content=self.instructions)]
        )
        return ChatBody(
            model=self.model,
            messages=first + [item.as_message() for item in self.input],
            max_completion_tokens=self.max_output_tokens,
            user=self.user,
            **self.model_dump(include=set(SamplingFields.model_fields)),
        )

    def generations(self, session: str | None = None) -> list[GenerationRequest]:
        """The one generation this body asks for, built as the chat route builds it."""
        return self.chat().generations(session)
