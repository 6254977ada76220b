"""Text generation inside a runtime worker: the prefill and decode loop, tokens streamed.

The loop never leaves the worker: each token's event goes back over the worker's pipe as
a :class:`GeneratedReply` the moment it is chosen, and between tokens the worker looks for
a :class:`CancelRequest` (the caller went away) and stops at once. Tokenizing, chat
templates and detokenizing happen here too (``TextCodec``): tokenizers are uploads.

A session keeps its instance's KV cache between requests, and the tokens it holds: a
request whose prompt starts with them only feeds the rest (at least its last token, whose
logits pick the next one). Without a session a generation starts at position 0 of an
instance kept for that (its cache is not cleared, as upstream's runner does not clear it).
"""

from __future__ import annotations

import contextlib
import math
import select
import time
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pteforge.contracts.generation import (
    FinishReason,
    GenerationEvent,
    GenerationRequest,
    TokenLogprob,
    Usage,
)
from pteforge.contracts.runtime_messages import (
    BlobFile,
    CancelledReply,
    GeneratedReply,
    GenerateRequest,
    WorkerReply,
)
from pteforge.runtime.artifact_files import verified_path
from pteforge.runtime.errors import InvalidInputError, RuntimeLayerError, UnknownMethodError
from pteforge.runtime.instances import ProgramInstance
from pteforge.runtime.kernel_guards import check_value_bounds
from pteforge.runtime.language_model import LmInfo, LmMethod, check_prompt, read_lm_info
from pteforge.runtime.logprobs import step_logprobs
from pteforge.runtime.lru import ByteLRU
from pteforge.runtime.metadata import input_name
from pteforge.runtime.sampling import LogitShaping, Sampler
from pteforge.runtime.text_codec import TextCodec
from pteforge.runtime.text_stream import TextStream
from pteforge.runtime.wire import encode_message, recv_request, send_frame, token_frame

if TYPE_CHECKING:
    from pteforge.runtime.worker import Executor, LoadedProgram

ECHO_TOKENS_PER_EVENT = 32
"""Prompt tokens whose scores one echoed event carries."""
_CODEC_CACHE_BYTES = 1 << 30
"""Memory the worker's loaded tokenizers may hold (the newest is kept whatever it holds)."""
_CODEC_BYTES_PER_FILE_BYTE = 16
"""A loaded tokenizer's memory per byte of its files (measured: a 70 MiB ``tokenizer.json``
held 1.1 GB); counting file bytes let the cache hold gigabytes."""
_INFOS_KEPT = 256


class Channel:
    """The worker's side of a streamed answer: events out, a cancel in."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._incoming = select.poll()  # a syscall a look (Connection.poll builds a selector)
        self._incoming.register(conn.fileno(), select.POLLIN)

    def send_event(self, event: GenerationEvent) -> None:
        """Send an event that does not end the generation."""
        send_frame(self.conn, encode_message(GeneratedReply(event=event), []))

    def send_token(
        self, text: str, token: int, scored: TokenLogprob | None, prompt_tokens: int | None
    ) -> None:
        """Send the event of one token that does not end the text (``scored``: its
        logprobs, when asked for; ``prompt_tokens`` on the first one after the prompt)."""
        frame = None
        if scored is None:  # the usual case, written straight (a text orjson refuses is not)
            with contextlib.suppress(TypeError):
                frame = token_frame(text, token, prompt_tokens)
        if frame is None:
            event = GenerationEvent(
                text=text, token_ids=(token,), logprobs=_one(scored), prompt_tokens=prompt_tokens
            )
            self.send_event(event)
        else:
            send_frame(self.conn, frame)

    def cancelled(self) -> bool:
        """Whether the pool asked to stop (only a cancel is ever sent mid-stream)."""
        if not self._incoming.poll(0):
            return False
        with contextlib.suppress(RuntimeLayerError):  # a malformed frame: stop all the same
            recv_request(self.conn)
        return True


class LanguageModels:
    """One worker's generation state: tokenizers, model metadata, sessions' tokens."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.codecs: ByteLRU[tuple[str, str | None], TextCodec] = ByteLRU(_CODEC_CACHE_BYTES)
        self.infos: ByteLRU[tuple[str, str], LmInfo] = ByteLRU(_INFOS_KEPT)
        self.cached: weakref.WeakKeyDictionary[ProgramInstance, list[int]] = (
            weakref.WeakKeyDictionary()
        )
        self.instances: ByteLRU[str, ProgramInstance] = ByteLRU(executor.cache_bytes)

    def generate(self, request: GenerateRequest, conn: Connection) -> WorkerReply:
        """Run the request's generation, streaming its events; the last reply."""
        loaded, _ = self.executor.program(request.sha256, request.path)
        name = request.method
        if name not in loaded.signatures:
            raise UnknownMethodError(f"the artifact has no method {name!r}")
        info = self._info(loaded, name)
        bounds = {input_name(0): info.vocab_size, input_name(1): info.context_len}
        check_value_bounds(loaded.guarded, name, bounds)
        codec = self._codec(request.tokenizer, request.tokenizer_config)
        if request.session is None:
            instance, history = self._instance(loaded), []
        else:
            instance = self.executor.session(request, request.session, loaded)
            history = self.cached.setdefault(instance, [])
        step = LmMethod(instance.method(name), info)
        return run(step, codec, request.request, history, Channel(conn), request.seconds)

    def _instance(self, loaded: LoadedProgram) -> ProgramInstance:
        """The program's instance for generations without a session. Each starts at
        position 0 without clearing the cache, as ExecuTorch's ``TextLLMRunner.reset``
        does: the convention masks attention by position, so what lies beyond the tokens
        fed so far is never read."""
        instance = self.instances.get(loaded.sha256)
        if instance is None:
            instance = self.executor.instance(loaded, eager=True)
            self.instances.put(loaded.sha256, instance, max(1, loaded.state.planned_bytes))
        return instance

    def _info(self, loaded: LoadedProgram, name: str) -> LmInfo:
        info = self.infos.get((loaded.sha256, name))
        if info is None:
            info = read_lm_info(loaded.instance, loaded.signatures[name])
            self.infos.put((loaded.sha256, name), info, 1)
        return info

    def _codec(self, tokenizer: BlobFile, config: BlobFile | None) -> TextCodec:
        key = (tokenizer.sha256, config.sha256 if config else None)
        codec = self.codecs.get(key)
        if codec is None:
            path = verified_path(tokenizer.sha256, tokenizer.path)
            config_path = verified_path(config.sha256, config.path) if config else None
            codec = TextCodec(path, config_path)
            self.codecs.put(key, codec, _held_bytes(path, config_path))
        return codec


def _held_bytes(*paths: Path | None) -> int:
    """What a tokenizer loaded from ``paths`` holds, estimated from its files' bytes."""
    return _CODEC_BYTES_PER_FILE_BYTE * sum(p.stat().st_size for p in paths if p is not None)


def run(
    step: LmMethod,
    codec: TextCodec,
    request: GenerationRequest,
    history: list[int],
    out: Channel,
    seconds: float | None = None,
) -> WorkerReply:
    """Prefill the prompt, then decode token by token until a stop, the limit, a cancel or
    ``seconds`` from now: a generation holds its worker, which other callers wait for, so
    one that runs that long ends as one that reached ``max_tokens`` does (``length``)."""
    deadline = math.inf if seconds is None else time.monotonic() + seconds
    prompt = codec.prompt_ids(request, step.info.context_len)
    check_prompt(prompt, step.info)
    shaping = LogitShaping.of(request, step.info.vocab_size)  # refused before any work
    prefilled = prefill(step, codec, request, prompt, history, out, deadline)
    if prefilled is None:
        return CancelledReply()
    logits, echoed = prefilled
    if echoed is not None and request.max_tokens == 0:
        return GeneratedReply(event=echoed.model_copy(update=_ending("length", prompt, 0)))
    if echoed is not None:
        out.send_event(echoed.model_copy(update={"prompt_tokens": len(prompt)}))
    sampler = Sampler(request.temperature, request.top_p, request.seed, shaping)
    eos = step.end_ids(codec.eos_ids, request.ignore_eos)
    text = TextStream(codec.decode, request.stop, context=prompt)
    for count in range(1, request.max_tokens + 1):
        token = sampler.pick(logits)
        scored = _scored(logits, token, request.logprobs, codec)
        ended = token in eos
        delta = "" if ended else text.push(token)
        full = len(history) >= step.info.context_len
        late = time.monotonic() >= deadline
        if ended or text.stopped or full or late or count == request.max_tokens:
            delta += text.finish()  # may find a stop string: a last piece can end mid-character
            reason: FinishReason = "stop" if ended or text.stopped else "length"
            ending = _ending(reason, prompt, count)
            final = GenerationEvent(text=delta, token_ids=(token,), logprobs=_one(scored), **ending)
            return GeneratedReply(event=final)
        first = echoed is None and count == 1  # the prompt's length goes out once
        out.send_token(delta, token, scored, len(prompt) if first else None)
        if out.cancelled():
            return CancelledReply()
        logits = step.feed([token], history)
    raise AssertionError("unreachable: the last count returns")


def prefill(
    step: LmMethod,
    codec: TextCodec,
    request: GenerationRequest,
    prompt: list[int],
    history: list[int],
    out: Channel,
    deadline: float = math.inf,
) -> tuple[Any, GenerationEvent | None] | None:
    """Feed the prompt (keeping what the session's cache holds of it, unless each token is
    scored for ``echo``, by ``deadline``): the logits after it, and the echoed prompt's last
    event when asked for; None when the caller went away meanwhile."""
    if request.echo and request.logprobs is not None:
        return _scored_prompt(step, codec, request, prompt, history, out, deadline)
    reuse = _common_prefix(history, prompt)
    del history[reuse:]
    logits = step.feed(prompt[reuse:], history)
    echoed = GenerationEvent(text=_prompt_text(codec, request, prompt)) if request.echo else None
    return logits, echoed


def _scored_prompt(
    step: LmMethod,
    codec: TextCodec,
    request: GenerationRequest,
    prompt: list[int],
    history: list[int],
    out: Channel,
    deadline: float,
) -> tuple[Any, GenerationEvent] | None:
    """Feed the prompt from position 0, each token scored: its scores go out
    :data:`ECHO_TOKENS_PER_EVENT` at a time (a prompt of the whole context with 20
    alternatives a token is megabytes, which one event would hold in both processes), the
    caller looked for between them; the logits after it and the last event. Past
    ``deadline`` it fails: those events keep the pool's timeout between two messages from
    ever firing, and a model fed one token at a time held its worker for the whole prompt."""
    del history[:]
    text, pending, logits = _prompt_text(codec, request, prompt), [], None
    scores = step.score(prompt, history, request.logprobs or 0, codec.token_bytes)
    for count, (scored, row) in enumerate(scores, 1):
        pending.append(scored)
        logits = row
        if len(pending) == ECHO_TOKENS_PER_EVENT and count < len(prompt):
            out.send_event(GenerationEvent(text=text, logprobs=tuple(pending)))
            text, pending = "", []
            if out.cancelled():
                return None
            if time.monotonic() >= deadline:
                raise InvalidInputError(
                    f"scoring the prompt took longer than a request may hold its runtime "
                    f"worker (PTEFORGE_RUNTIME_REQUEST_TIMEOUT_SECONDS): {count} of its "
                    f"{len(prompt)} tokens were scored; score a shorter prompt"
                )
    return logits, GenerationEvent(text=text, logprobs=tuple(pending))


def _prompt_text(codec: TextCodec, request: GenerationRequest, prompt: list[int]) -> str:
    """The echoed prompt: a text prompt as it came, token ids (or a chat) decoded."""
    return request.prompt if request.prompt is not None else codec.decode(prompt)


def _ending(reason: FinishReason, prompt: list[int], generated: int) -> dict[str, Any]:
    """The last event's ``finish_reason`` and ``usage``."""
    total = len(prompt) + generated
    usage = Usage(prompt_tokens=len(prompt), completion_tokens=generated, total_tokens=total)
    return {"finish_reason": reason, "usage": usage}


def _scored(logits: Any, token: int, top: int | None, codec: TextCodec) -> TokenLogprob | None:
    """The token's logprobs when the request asked for them (read before the next step:
    the logits may be a view of the method's memory)."""
    return None if top is None else step_logprobs(logits, token, top, codec.token_bytes)


def _one(scored: TokenLogprob | None) -> tuple[TokenLogprob, ...] | None:
    return None if scored is None else (scored,)


def _common_prefix(cached: list[int], prompt: list[int]) -> int:
    """How many of the cached tokens can stay: the shared prefix, short of the whole prompt
    (its last token is fed again for the logits that pick the next token)."""
    limit = min(len(cached), len(prompt) - 1)
    for i in range(limit):
        if cached[i] != prompt[i]:
            return i
    return limit
