"""The objects of OpenAI's Responses API a generation answers with: one ``response`` object,
or its stream of named server-sent events (``event: <type>`` then ``data: {...}``).

A stream is the sequence the ``openai`` package's ``responses.stream`` helper reads:
``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, one ``response.output_text.delta`` per piece of text, then
``response.output_text.done``, ``response.content_part.done``, ``response.output_item.done``
and ``response.completed`` (``response.incomplete`` when the text ended at
``max_output_tokens`` or the context), each with its ``sequence_number``. An error once the
stream has started is its last event, an ``error`` event. There is no ``[DONE]``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from pteforge.contracts.generation import GenerationEvent, Usage
from pteforge.server.generation.completion_objects import Collected
from pteforge.server.generation.errors import answer_of
from pteforge.server.generation.responses_body import ResponsesBody
from pteforge.server.generation.streaming import Payload, StreamFormat, sse

OUTPUT = {"output_index": 0}
"""Where the one output item stands."""


def named_sse(payload: Payload) -> bytes:
    """One server-sent event named by its payload's ``type``, as the Responses API sends it."""
    return b"event: " + orjson.dumps(payload["type"])[1:-1] + b"\n" + sse(payload)


def _usage(usage: Usage | None) -> dict[str, Any] | None:
    """The Responses API's ``usage`` of a generation's."""
    if usage is None:
        return None
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


def _status(done: Collected | None) -> str:
    """``in_progress`` until the generation ends, then ``completed`` or, at its length limit,
    ``incomplete``."""
    if done is None or done.finish_reason is None:
        return "in_progress"
    return "incomplete" if done.finish_reason == "length" else "completed"


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


@dataclass
class ResponseShape:
    """The Responses API objects of one request: one id, item id and time."""

    body: ResponsesBody
    id: str = field(default_factory=lambda: f"resp_{uuid.uuid4().hex}")
    item_id: str = field(default_factory=lambda: f"msg_{uuid.uuid4().hex}")
    created_at: int = field(default_factory=lambda: int(time.time()))
    done: Collected = field(default_factory=Collected)
    """What a stream has generated so far."""
    sequence: int = 0
    """The next event's ``sequence_number``."""

    def response(self, done: Collected | None) -> dict[str, Any]:
        """The ``response`` object: in progress (no output yet) while ``done`` is None."""
        body, status = self.body, _status(done)
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": incomplete,
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "metadata": body.metadata or {},
            "model": body.model,
            "output": [] if done is None else [self._message(done)],
            "parallel_tool_calls": body.parallel_tool_calls is not False,
            "previous_response_id": None,
            "reasoning": None,
            "service_tier": "default",
            "store": False,
            "temperature": 1.0 if body.temperature is None else body.temperature,
            "text": {"format": {"type": "text"}},
            "tool_choice": body.tool_choice or "auto",
            "tools": [],
            "top_p": 1.0 if body.top_p is None else body.top_p,
            "truncation": "disabled",
            "usage": None if done is None else _usage(done.usage),
            "user": body.user,
        }

    def _message(self, done: Collected, content: bool = True) -> dict[str, Any]:
        """The output message item (without its content while it has none)."""
        return {
            "type": "message",
            "id": self.item_id,
            "status": _status(done),
            "role": "assistant",
            "content": [_text_part(done.text)] if content else [],
        }

    def whole(self, done: Sequence[Collected]) -> dict[str, Any]:
        """The ``response`` object of the finished generation (the one choice)."""
        return self.response(done[0])

    def wire(self, count: int, index: int) -> StreamFormat:
        """How the generation is streamed (one choice: ``count`` 1, ``index`` 0)."""
        return StreamFormat(self.events, self.failed, self.opening(), encode=named_sse)

    def _numbered(self, payload: Payload) -> Payload:
        """``payload`` with the next ``sequence_number``."""
        payload["sequence_number"] = self.sequence
        self.sequence += 1
        return payload

    def _event(self, kind: str, **fields: Any) -> Payload:
        """An event of ``kind``, numbered."""
        return self._numbered({"type": f"response.{kind}", **fields})

    def _part(self, kind: str, **fields: Any) -> Payload:
        """An event about the output item's one text part."""
        return self._event(kind, item_id=self.item_id, **OUTPUT, content_index=0, **fields)

    def opening(self) -> Iterator[Payload]:
        """The events before the first text: the response and its output item started."""
        yield self._event("created", response=self.response(None))
        yield self._event("in_progress", response=self.response(None))
        item = self._message(self.done, content=False)
        yield self._event("output_item.added", **OUTPUT, item=item)
        yield self._part("content_part.added", part=_text_part(""))

    def events(self, event: GenerationEvent) -> Iterator[Payload]:
        """The events of one generation event: its text, then, at the last, the text, part,
        item and response done."""
        self.done.add(event)
        if event.text:
            yield self._part("output_text.delta", delta=event.text, logprobs=[])
        if event.finish_reason is None:
            return
        text = self.done.text
        yield self._part("output_text.done", text=text, logprobs=[])
        yield self._part("content_part.done", part=_text_part(text))
        yield self._event("output_item.done", **OUTPUT, item=self._message(self.done))
        ending = "incomplete" if _status(self.done) == "incomplete" else "completed"
        yield self._event(ending, response=self.response(self.done))

    def failed(self, exc: Exception) -> Payload:
        """The ``error`` event that ends a stream that failed once it started."""
        error = answer_of(exc).body()["error"]
        code = error["code"] or error["type"]
        return self._numbered({**error, "type": "error", "code": code})
