"""The generation plumbing every text route shares: start the engine, gather its events into
one answer, or relay them as server-sent events, always closing the engine's iterator.

A stream's first event is awaited before the answer starts (``first_event``), so a refused
prompt is an error status, not a broken stream. A client that disconnects mid-stream closes
the relay, whose ``finally`` closes the engine's iterator (shielded from the cancellation),
which stops the worker's loop and frees the worker at once.

A slow client never holds the worker: the relay reads the engine's events ahead of it into
a bounded ``Backlog`` (``backlog.py``), so the generation ends at the worker's pace, and
``EventStream`` gives each send to the client a deadline (``SendDeadline``), past which the
connection is closed and the generation, if it still runs, cancelled.

The caller is authenticated again before each event is passed on (``recheck``: the token
cache's lookup, a database read at most once per its TTL), as a gRPC stream is at each
request: once the token is revoked, the generation ends as a disconnect does, with an error
as its last event (or, not streamed, as its answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import orjson
from starlette.responses import StreamingResponse
from starlette.types import Message, Send

from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.server.generation.backlog import Backlog, answer_too_large, event_bytes
from pteforge.server.generation.completion_objects import Collected
from pteforge.server.generation.target import Target
from pteforge.server.inference.dependencies import InferenceState

log = logging.getLogger(__name__)

Events = AsyncGenerator[GenerationEvent, None]
Payload = dict[str, Any]
SSE = "text/event-stream"
"""The media type of a server-sent event stream."""
Recheck = Callable[[], Awaitable[object]]
"""Authenticates the caller again: raises ``UnauthorizedError`` once its token is revoked."""


def start(
    state: InferenceState, project_id: str, target: Target, generation: GenerationRequest
) -> Events:
    """The engine's events; a session key names a session among the project's only."""
    sha256, source = target.program
    return state.pool.generate_async(
        sha256,
        source,
        generation,
        tokenizer=target.tokenizer,
        tokenizer_config=target.tokenizer_config,
        scope=project_id,
    )


async def close(events: Events) -> None:
    """Close the engine's iterator even from a cancelled task (a client that went away)."""
    with anyio.CancelScope(shield=True):
        await events.aclose()


async def collect(
    events: Events, recheck: Recheck, limit_bytes: int, held_before: int = 0
) -> Collected:
    """Every event of a generation, gathered into one answer (``recheck`` before each).

    The answer waits whole in the server, so it may hold ``limit_bytes`` (counted as a
    stream's backlog counts what waits for its client; ``held_before``: what the answer's
    earlier choices hold): past that the generation is stopped and the request refused.
    Unbounded, one request of a project's fast model with 20 logprobs a token held 3.3 GB
    of the server's memory."""
    done = Collected(held_bytes=held_before)
    try:
        async for event in events:
            await recheck()
            done.held_bytes += event_bytes(event)
            if done.held_bytes > limit_bytes:
                raise answer_too_large(limit_bytes)
            done.add(event)
    finally:
        await close(events)
    return done


async def collect_choices(
    start_one: Callable[[int], Events], count: int, recheck: Recheck, limit_bytes: int
) -> list[Collected]:
    """Each of ``count`` choices gathered in turn (``start_one(i)``: choice ``i``'s events),
    under one bound for the whole answer: every choice counts against ``limit_bytes``."""
    done: list[Collected] = []
    for index in range(count):
        before = done[-1].held_bytes if done else 0
        done.append(await collect(start_one(index), recheck, limit_bytes, before))
    return done


async def first_event(events: Events) -> GenerationEvent:
    """The first event of a stream, before its answer starts (the iterator is closed when
    it raises: a prompt longer than the context, a project over its limits, ...)."""
    try:
        return await anext(events)
    except BaseException:
        await close(events)
        raise


def sse(payload: Payload) -> bytes:
    """One server-sent event carrying ``payload`` as JSON (orjson: a few microseconds a
    token less than the standard library's)."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


@dataclass(frozen=True)
class StreamFormat:
    """How a route writes a generation as server-sent events (each payload by ``encode``):
    ``opening`` first, what ``render`` makes of each event, then ``ending`` (raw bytes);
    ``fail`` is the last event of an answer that failed once it started."""

    render: Callable[[GenerationEvent], Iterable[Payload]]
    fail: Callable[[Exception], Payload]
    opening: Iterable[Payload] = ()
    ending: bytes = b""
    encode: Callable[[Payload], bytes] = sse


async def relay(
    first: GenerationEvent,
    events: Events,
    wire: StreamFormat,
    recheck: Recheck,
    buffer_bytes: int,
) -> AsyncGenerator[bytes, None]:
    """The events from ``first`` to the last (the one with a ``finish_reason``) as
    server-sent events in ``wire``. An error once the answer has started becomes its last
    event (``wire.fail``): a failed generation, a caller ``recheck`` (run before each event)
    no longer accepts, or a client more than ``buffer_bytes`` behind the generation
    (``Backlog``)."""
    ahead = None if first.finish_reason is not None else Backlog(events, buffer_bytes)
    try:
        for payload in wire.opening:
            yield wire.encode(payload)
        event: GenerationEvent | None = first
        while event is not None:
            await recheck()
            for payload in wire.render(event):
                yield wire.encode(payload)
            if event.finish_reason is not None or ahead is None:
                break
            event = await ahead.next()
    except Exception as exc:
        yield wire.encode(wire.fail(exc))
    finally:
        if ahead is not None:
            await ahead.close()
        await close(events)
    if wire.ending:
        yield wire.ending


async def answer_stream(
    state: InferenceState, events: Events, wire: StreamFormat, recheck: Recheck
) -> EventStream:
    """The streamed answer of a generation route: its first event awaited (a refusal is
    still an error status), then :func:`relay` within ``state.streams``' bounds."""
    first = await first_event(events)
    limits = state.streams
    relayed = relay(first, events, wire, recheck, limits.buffer_bytes)
    return EventStream(relayed, limits.send_timeout_s)


async def answer_choices(
    state: InferenceState,
    start_one: Callable[[int], Events],
    count: int,
    wire_of: Callable[[int], StreamFormat],
    recheck: Recheck,
) -> EventStream:
    """Several choices streamed one after another (``start_one(i)``: choice ``i``'s events,
    ``wire_of(i)``: how its events are written), each as :func:`answer_stream` relays one:
    the first choice's first event awaited before the answer starts; the stream ends at
    the first failure (its error the last event), and with ``wire_of(0).ending``."""
    events = start_one(0)
    first = await first_event(events)
    relayed = _relay_choices(state, (first, events), start_one, count, wire_of, recheck)
    return EventStream(relayed, state.streams.send_timeout_s)


async def _relay_choices(
    state: InferenceState,
    started: tuple[GenerationEvent, Events],
    start_one: Callable[[int], Events],
    count: int,
    wire_of: Callable[[int], StreamFormat],
    recheck: Recheck,
) -> AsyncGenerator[bytes, None]:
    failures: list[Exception] = []
    wire = wire_of(0)
    for index in range(count):
        if index:  # the first choice's is built above, for the ending after any break
            wire = wire_of(index)
        try:
            first, events = started if index == 0 else (await _first(start_one(index)))
        except Exception as exc:
            yield wire.encode(wire.fail(exc))
            break
        noting = dataclasses.replace(wire, fail=partial(_noted, failures, wire.fail), ending=b"")
        relayed = relay(first, events, noting, recheck, state.streams.buffer_bytes)
        async with contextlib.aclosing(relayed) as pieces:  # a client gone: the worker freed
            async for piece in pieces:
                yield piece
        if failures:
            break
    yield wire.ending  # every choice's is the stream's one ending


async def _first(events: Events) -> tuple[GenerationEvent, Events]:
    return await first_event(events), events


def _noted(
    failures: list[Exception], fail: Callable[[Exception], Payload], exc: Exception
) -> Payload:
    failures.append(exc)
    return fail(exc)


class EventStream(StreamingResponse):
    """Server-sent events whose every send to the client must end within
    ``send_timeout_s``: past it the stream stops (its iterator closed: a generation is
    cancelled) and the connection is closed, as for a client that went away."""

    def __init__(self, content: AsyncGenerator[bytes, None], send_timeout_s: float) -> None:
        super().__init__(content, media_type=SSE)
        self.content = content
        self.send_timeout_s = send_timeout_s

    async def stream_response(self, send: Send) -> None:
        """Starlette's, each send bounded; the iterator is closed however it ends."""
        deadline = SendDeadline(self.send_timeout_s)
        try:
            async with deadline.scope:
                await super().stream_response(deadline.bound(send))
        except TimeoutError:
            log.warning(
                "closed a stream whose client accepted nothing for %.0f s "
                "(PTEFORGE_STREAM_SEND_TIMEOUT_SECONDS)",
                self.send_timeout_s,
            )
        finally:
            deadline.close()
            with anyio.CancelScope(shield=True):
                await self.content.aclose()


class SendDeadline:
    """Raises ``TimeoutError`` out of ``scope`` once a send through :meth:`bound` has waited
    ``timeout_s``. One timer for the whole stream, which looks at the send under way when it
    fires: a deadline around each send (``anyio.fail_after``) cost ~15 us of the server's
    CPU a streamed token, this a clock read. Made and entered on the running loop."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.scope = asyncio.timeout(None)
        self.loop = asyncio.get_running_loop()
        self.since: float | None = None  # when the send under way began
        self.timer = self.loop.call_later(timeout_s, self._check)

    def bound(self, send: Send) -> Send:
        """``send``, under this deadline."""

        async def bounded(message: Message) -> None:
            self.since = self.loop.time()
            await send(message)
            self.since = None

        return bounded

    def _check(self) -> None:
        now = self.loop.time()
        if self.since is not None and now - self.since >= self.timeout_s:
            self.scope.reschedule(now)  # cancels the task: ``scope`` raises TimeoutError
            return
        began = now if self.since is None else self.since
        self.timer = self.loop.call_at(began + self.timeout_s, self._check)

    def close(self) -> None:
        """Stop the timer."""
        self.timer.cancel()
