"""Text generation with a language model deployed as a model version (``/v1/completions``
and ``/v1/chat/completions``, the OpenAI-compatible routes): the whole text at once, or
streamed to a callback as the server-sent events arrive."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pteforge.client.calls import Call
from pteforge.client.errors import PteforgeError, error_from_body
from pteforge.client.operations import Op, Operations
from pteforge.client.sse import Event, EventSink

SESSION_HEADER = "X-Pteforge-Session"
TextCallback = Callable[[str], object]
"""Called with each piece of text as it arrives (always whole UTF-8)."""


@dataclass
class Generation:
    """A finished generation: its text, why it ended (``stop`` or ``length``) and the
    token counts (``prompt_tokens``, ``completion_tokens``, ``total_tokens``)."""

    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


class TextSink(EventSink):
    """Reads a completions stream: hands each text delta to ``on_text`` until ``[DONE]``."""

    def __init__(self, on_text: TextCallback) -> None:
        super().__init__()
        self._on_text = on_text
        self.generation = Generation()

    def event(self, event: Event) -> bool:
        if event.data == "[DONE]":
            return False
        self._chunk(event.data)
        return True

    def _chunk(self, data: str) -> None:
        try:
            payload = json.loads(data)
        except ValueError:
            raise PteforgeError(f"a completion chunk is not JSON: {data[:80]!r}") from None
        if "error" in payload:  # the generation failed after the answer began
            raise error_from_body(500, payload, "the generation failed")
        if payload.get("usage"):
            self.generation.usage = dict(payload["usage"])
        for choice in payload.get("choices", []):
            text = _text(choice, "delta")
            self.generation.text += text
            self.generation.finish_reason = choice.get("finish_reason") or (
                self.generation.finish_reason
            )
            if text:
                self._on_text(text)


def _text(choice: dict[str, Any], chat_key: str) -> str:
    """A choice's text: completions' ``text``, or chat's ``message``/``delta`` content."""
    if "text" in choice:
        return str(choice["text"] or "")
    return str((choice.get(chat_key) or {}).get("content") or "")


def _complete(
    path: str, body: dict[str, Any], on_text: TextCallback | None, headers: dict[str, str]
) -> Op[Generation]:
    """One completion of ``path``: buffered, or streamed to ``on_text``."""
    if on_text is None:
        reply = yield Call("POST", path, json=body, headers=headers)
        answer = reply.json()
        choice = answer["choices"][0]
        text = _text(choice, "message")
        return Generation(text, choice["finish_reason"], dict(answer["usage"]))
    sink = TextSink(on_text)
    streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
    yield Call("POST", path, json=streamed, headers=headers, sink=sink)
    return sink.generation


def _model(model: str, version: int | None) -> str:
    """The ``model`` field: a model name (its latest version), or ``name:version``."""
    return model if version is None else f"{model}:{version}"


def _sampling(
    temperature: float, top_p: float, seed: int | None, stop: Sequence[str]
) -> dict[str, Any]:
    return {"temperature": temperature, "top_p": top_p, "seed": seed, "stop": list(stop) or None}


def generate(
    ops: Operations,
    model: str,
    prompt: str | Sequence[int],
    *,
    max_tokens: int = 16,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    stop: Sequence[str] = (),
    version: int | None = None,
    on_text: TextCallback | None = None,
) -> Op[Generation]:
    """Continue ``prompt`` (text, or token ids) with model ``model`` (its latest version, or
    ``version``), which needs a tokenizer. ``temperature`` 0 is greedy. With ``on_text``
    the text is streamed to it piece by piece as it is generated."""
    body: dict[str, Any] = {
        "model": _model(model, version),
        "prompt": prompt if isinstance(prompt, str) else list(prompt),
        "max_tokens": max_tokens,
        **_sampling(temperature, top_p, seed, stop),
    }
    return (yield from _complete("/v1/completions", body, on_text, {}))


def chat(
    ops: Operations,
    model: str,
    messages: Sequence[Mapping[str, str]],
    *,
    max_tokens: int | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
    stop: Sequence[str] = (),
    version: int | None = None,
    session: str | None = None,
    on_text: TextCallback | None = None,
) -> Op[Generation]:
    """The assistant's answer to ``messages`` (``{"role", "content"}``), rendered by the
    model's chat template; without ``max_tokens`` it runs to the end of the sequence or the
    context. ``session`` keeps the model's KV cache between turns on the server (a later
    turn computes only its new tokens). ``on_text`` streams the answer as in ``generate``."""
    body: dict[str, Any] = {
        "model": _model(model, version),
        "messages": [dict(message) for message in messages],
        "max_tokens": max_tokens,
        **_sampling(temperature, top_p, seed, stop),
    }
    headers = {} if session is None else {SESSION_HEADER: session}
    return (yield from _complete("/v1/chat/completions", body, on_text, headers))
