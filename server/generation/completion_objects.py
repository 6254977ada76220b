"""The OpenAI objects a completion or chat generation answers with: a whole completion, or
stream chunks (the Responses API's are ``responses_answer.py``'s).

A stream's chunks are OpenAI's: for chat, a first chunk with the assistant's role, then one
per text delta, then one with the ``finish_reason``; with ``stream_options.include_usage``
a last chunk with no choices and the usage. The caller ends the stream with ``[DONE]``.

Logprobs, when asked for, come in each API's own shape: chat's ``content`` list (each token
with its ``bytes`` and ``top_logprobs``), the completions API's parallel lists (``tokens``,
``token_logprobs``, ``top_logprobs`` holding the chosen token beside the most likely ones,
``text_offset``); in a stream, each chunk has those of its own tokens.
"""

from __future__ import annotations

import codecs
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pteforge.contracts.generation import FinishReason, GenerationEvent, TokenLogprob, Usage


def _utf8_decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


@dataclass
class Collected:
    """A generation's events gathered into one answer."""

    pieces: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    logprobs: list[TokenLogprob] = field(default_factory=list)
    held_bytes: int = 0
    """What the answer holds so far, this choice and those before it (``streaming.collect``)."""

    @property
    def text(self) -> str:
        """The whole text, joined once (``+=`` on an attribute copies the text so far at
        each event: 200,000 events of four characters took 13 s of the event loop)."""
        return "".join(self.pieces)

    def add(self, event: GenerationEvent) -> None:
        """Append one event."""
        self.pieces.append(event.text)
        self.token_ids += event.token_ids
        self.logprobs += event.logprobs or ()
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
    continuous_usage: bool = False
    """Whether every chunk carries its choice's usage so far, once the prompt's length is
    known (``stream_options.continuous_usage_stats``)."""
    logprobs: bool = False
    """Whether each choice carries its tokens' logprobs."""
    n: int = 1
    """Choices of each prompt: usage counts a prompt once in every ``n`` choices."""
    id: str = field(default="")
    _offset: int = field(default=0, init=False, repr=False)  # completions' next text_offset
    _utf8: codecs.IncrementalDecoder = field(default_factory=_utf8_decoder, init=False, repr=False)
    _usages: list[Usage | None] = field(default_factory=list, init=False, repr=False)
    _so_far: tuple[int | None, int] = field(default=(None, 0), init=False, repr=False)
    """This choice's prompt tokens (once known) and tokens generated so far."""
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

    def whole(self, done: Sequence[Collected]) -> dict[str, Any]:
        """The completion object of finished generations, a choice each: ``n`` of each
        prompt, in order."""
        choices = [self._choice(index, one) for index, one in enumerate(done)]
        answer = self._object("chat.completion" if self.chat else "text_completion", choices)
        answer["usage"] = _usage([one.usage for one in done], self.n)
        return answer

    def _choice(self, index: int, done: Collected) -> dict[str, Any]:
        self._start_offsets()
        choice: dict[str, Any] = {"index": index, "logprobs": self._logprobs(done.logprobs)}
        choice["finish_reason"] = done.finish_reason
        if self.token_ids:
            choice["token_ids"] = done.token_ids
        if self.chat:
            choice["message"] = {"role": "assistant", "content": done.text}
        else:
            choice["text"] = done.text
        return choice

    def _chunk(
        self,
        text: str | None,
        finish: FinishReason | None,
        ids: tuple[int, ...] = (),
        scored: Sequence[TokenLogprob] | None = None,
        index: int = 0,
    ) -> dict[str, Any]:
        logprobs = None if scored is None else self._logprobs(scored)
        choice: dict[str, Any] = {"index": index, "logprobs": logprobs, "finish_reason": finish}
        if self.token_ids:
            choice["token_ids"] = list(ids)
        if self.chat:
            choice["delta"] = {} if text is None else {"content": text}
            return self._object("chat.completion.chunk", [choice])
        choice["text"] = text or ""
        return self._object("text_completion", [choice])

    def opening(self, index: int = 0) -> Iterator[dict[str, Any]]:
        """The chunk before a choice's first text: the assistant's role (chat only)."""
        self._start_offsets()
        if self.chat:
            chunk = self._chunk(None, None, index=index)
            chunk["choices"][0]["delta"] = {"role": "assistant", "content": ""}
            yield chunk

    def chunks(
        self, event: GenerationEvent, index: int = 0, last: bool = True
    ) -> Iterator[dict[str, Any]]:
        """The chunks of one event of choice ``index``: its text, then its finish reason
        when it ends the choice, and after the ``last`` choice's, the usage of them all when
        asked for."""
        scored = event.logprobs if self.logprobs else None
        running = self._running(event) if self.continuous_usage else None
        if event.text or (self.token_ids and event.token_ids) or scored:
            yield _with_usage(
                self._chunk(event.text, None, event.token_ids, scored, index), running
            )
        if event.finish_reason is not None:
            yield _with_usage(self._chunk(None, event.finish_reason, index=index), running)
            self._usages.append(event.usage)
            usage = _usage(self._usages, self.n) if last and self.include_usage else None
            if usage is not None:
                kind = "chat.completion.chunk" if self.chat else "text_completion"
                yield {**self._object(kind, []), "usage": usage}

    def _start_offsets(self) -> None:
        """A new choice: its ``text_offset`` and its usage count from its own start."""
        self._offset, self._utf8 = 0, _utf8_decoder()
        self._so_far = (None, 0)

    def _running(self, event: GenerationEvent) -> dict[str, int] | None:
        """The choice's usage so far, this event counted (``continuous_usage``); None until
        the prompt's length is known."""
        prompt, generated = self._so_far
        if event.usage is not None:
            prompt, generated = event.usage.prompt_tokens, event.usage.completion_tokens
        else:
            prompt, generated = event.prompt_tokens or prompt, generated + len(event.token_ids)
        self._so_far = (prompt, generated)
        if prompt is None:
            return None
        return {
            "prompt_tokens": prompt,
            "completion_tokens": generated,
            "total_tokens": prompt + generated,
        }

    def _logprobs(self, scored: Sequence[TokenLogprob]) -> dict[str, Any] | None:
        """The choice's ``logprobs`` for these tokens (None unless asked for)."""
        if not self.logprobs:
            return None
        if self.chat:
            return {"content": [_chat_logprob(s) for s in scored], "refusal": None}
        offsets = []
        for token in scored:  # characters of the text before it: a token's bytes, decoded
            offsets.append(self._offset)  # (part of a character counts once it is whole)
            self._offset += len(self._utf8.decode(bytes(token.bytes)))
        return {
            "tokens": [s.token for s in scored],
            "token_logprobs": [s.logprob for s in scored],
            "top_logprobs": [_top_with_chosen(s) for s in scored],
            "text_offset": offsets,
        }


def _with_usage(chunk: dict[str, Any], usage: dict[str, int] | None) -> dict[str, Any]:
    """``chunk``, with ``usage`` when there is one."""
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def _usage(each: list[Usage | None], n: int) -> dict[str, int] | None:
    """The usage of all choices, ``n`` of each prompt: as OpenAI counts it, each prompt's
    tokens once and every choice's completion tokens."""
    counted = [one for one in each if one is not None]
    if len(counted) != len(each):
        return None
    prompt = sum(one.prompt_tokens for one in counted[::n])
    completion = sum(one.completion_tokens for one in counted)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _top_with_chosen(scored: TokenLogprob) -> dict[str, float | None] | None:
    """The completions API's ``top_logprobs`` entry: the most likely tokens and the chosen
    one (up to ``logprobs`` + 1 of them, as OpenAI answers); None for an echoed prompt's
    first token, as OpenAI answers it."""
    if scored.logprob is None:
        return None
    return {**{t.token: t.logprob for t in scored.top}, scored.token: scored.logprob}


def _chat_logprob(scored: TokenLogprob) -> dict[str, Any]:
    return {**_chat_entry(scored), "top_logprobs": [_chat_entry(t) for t in scored.top]}


def _chat_entry(scored: TokenLogprob) -> dict[str, Any]:
    return {"token": scored.token, "logprob": scored.logprob, "bytes": list(scored.bytes)}
