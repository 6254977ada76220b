"""The OpenAI objects a generation answers with: a whole completion, or stream chunks.

A stream's chunks are OpenAI's: for chat, a first chunk with the assistant's role, then one
per text delta, then one with the ``finish_reason``; with ``stream_options.include_usage``
a last chunk with no choices and the usage. The caller ends the stream with ``[DONE]``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pteforge.contracts.generation import FinishReason, GenerationEvent, Usage


@dataclass
class Collected:
    """A generation's events gathered into one answer."""

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    usage: Usage | None = None

    def add(self, event: GenerationEvent) -> None:
        """Append one event."""
        self.text += event.text
        self.token_ids += event.token_ids
        self.finish_reason = event.finish_reason or self.finish_reason
        self.usage = event.usage or self.usage


@dataclass
class Shape:
    """The OpenAI objects of one request: ``chat`` or text completion, one id and time."""

    model: str
    chat: bool
    token_ids: bool = False
    """Whether each choice carries its ``token_ids`` (the ``return_token_ids`` extension)."""
    include_usage: bool = False
    """Whether a stream ends with a chunk of the usage (``stream_options.include_usage``)."""
    id: str = field(default="")
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        self.id = self.id or f"{'chatcmpl' if self.chat else 'cmpl'}-{uuid.uuid4().hex}"

    def _object(self, kind: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

    def whole(self, done: Collected) -> dict[str, Any]:
        """The completion object of a finished generation."""
        choice: dict[str, Any] = {"index": 0, "logprobs": None}
        choice["finish_reason"] = done.finish_reason
        if self.token_ids:
            choice["token_ids"] = done.token_ids
        if self.chat:
            choice["message"] = {"role": "assistant", "content": done.text}
        else:
            choice["text"] = done.text
        answer = self._object("chat.completion" if self.chat else "text_completion", [choice])
        answer["usage"] = None if done.usage is None else done.usage.model_dump()
        return answer

    def _chunk(
        self, text: str | None, finish: FinishReason | None, ids: tuple[int, ...] = ()
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
        if self.token_ids:
            choice["token_ids"] = list(ids)
        if self.chat:
            choice["delta"] = {} if text is None else {"content": text}
            return self._object("chat.completion.chunk", [choice])
        choice["text"] = text or ""
        return self._object("text_completion", [choice])

    def opening(self) -> Iterator[dict[str, Any]]:
        """The chunk before the first text: the assistant's role (chat only)."""
        if self.chat:
            chunk = self._chunk(None, None)
            chunk["choices"][0]["delta"] = {"role": "assistant", "content": ""}
            yield chunk

    def chunks(self, event: GenerationEvent) -> Iterator[dict[str, Any]]:
        """The chunks of one event: its text, then its finish reason when it is the last,
        and the usage chunk after it when asked for."""
        if event.text or (self.token_ids and event.token_ids):
            yield self._chunk(event.text, None, event.token_ids)
        if event.finish_reason is not None:
            yield self._chunk(None, event.finish_reason)
            if self.include_usage and event.usage is not None:
                yield self.usage_chunk(event.usage)

    def usage_chunk(self, usage: Usage) -> dict[str, Any]:
        """The last chunk of a stream that asked for the usage."""
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {**self._object(kind, []), "usage": usage.model_dump()}
