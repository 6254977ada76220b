"""A stream's events read from the engine ahead of its client, so a slow client never holds
a runtime worker.

The engine's events are read as the worker sends them (``Backlog.pump``, a task of its own),
whatever the client's pace: the generation ends at the worker's pace and the worker is
handed back at once. What the client has not taken yet waits here as one event (the events
merge, as ``runtime.generation_replies`` merges those that queued up in the pipe), so the
stream sends it in one piece when the client is ready again. That text is bounded
(``limit_bytes``), the piece being sent included until its send is done (a client that
reads nothing holds it in that send for ever): a client that falls further behind has its
generation cancelled, the text that waited still sent, then an error event saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

import anyio

from pteforge.contracts.generation import GenerationEvent
from pteforge.runtime.generation_replies import merged
from pteforge.server.generation.errors import OpenAIError

TOKEN_ID_BYTES = 8
"""What a waiting token id counts against the bound, besides its text's UTF-8 bytes."""

EVENT_BYTES = 128
"""What a waiting event counts besides its contents. One takes about 900 bytes of the
server's memory (a ``GenerationEvent`` and its tuples): uncounted, an unread stream of a
fast model's one-token events held 106 MiB while 1.1 MiB was counted. At 128 a stream's
backlog holds at most ~7 times its bound, and an answer not streamed still carries 30,000
one-token events under the default 4 MiB."""


LOGPROB_BYTES = 256
"""What a waiting logprob (chosen or alternative) counts, besides its token's bytes. One
takes about 1.1 KB of the server's memory once read (a ``TokenLogprob`` and its fields);
counting 16 let a 4 MiB bound hold ~200 MB. At 256 the bound holds at most ~4.5 times
itself, and still lets an answer not streamed carry 750 tokens with 20 alternatives each, or
an 8,000-token echo with one (how evaluation harnesses ask)."""


def event_bytes(event: GenerationEvent) -> int:
    """What ``event`` counts against the bound: itself, its text's UTF-8 bytes, its token ids
    and its logprobs (each alternative too: 20 a token may be asked for)."""
    scored = [s for chosen in event.logprobs or () for s in (chosen, *chosen.top)]
    tokens = sum(len(s.token.encode()) + len(s.bytes) + LOGPROB_BYTES for s in scored)
    ids = TOKEN_ID_BYTES * len(event.token_ids)
    return EVENT_BYTES + len(event.text.encode()) + ids + tokens


def backlog_error(limit_bytes: int) -> OpenAIError:
    """The last event of a stream whose client fell ``limit_bytes`` behind."""
    return OpenAIError(
        408,
        f"the client read the stream too slowly: more than {limit_bytes} bytes of generated "
        "text waited for it (PTEFORGE_STREAM_BUFFER_BYTES), so the generation was stopped",
        code="stream_backlog_exceeded",
    )


def answer_too_large(limit_bytes: int) -> OpenAIError:
    """The answer to a request not streamed whose text passed ``limit_bytes``: it waits
    whole for its client, as a stream's text waits for a slow one."""
    return OpenAIError(
        400,
        f"the answer passed {limit_bytes} bytes of generated text and logprobs "
        "(PTEFORGE_STREAM_BUFFER_BYTES), which an answer not streamed holds whole in the "
        "server, so the generation was stopped: stream it (stream: true), or ask for fewer "
        "tokens or logprobs",
        "stream",
        "answer_too_large",
    )


class Backlog:
    """The events of ``events`` not yet passed on, at most ``limit_bytes`` of them."""

    def __init__(self, events: AsyncGenerator[GenerationEvent, None], limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._events = events
        self._waiting: list[GenerationEvent] = []
        self._bytes = 0  # what waits, and the piece last taken (its send may not be done)
        self._taken = 0  # that piece's share of ``_bytes``
        self._ended: Exception | None = None  # what ended the engine's events early
        self._done = False  # the engine's events are over (the last one read, or failed)
        self._arrived = asyncio.Event()
        self._pump = asyncio.create_task(self.pump())

    async def pump(self) -> None:
        """Read the engine's events until the last one, a failure, or the bound (which
        cancels the generation). The engine's iterator stays open after its last event
        (closed with the stream), so the generation still counts against its project's
        streams under way while its text waits for the client."""
        try:
            async for event in self._events:
                self._waiting.append(event)
                self._bytes += event_bytes(event)
                self._arrived.set()
                if event.finish_reason is not None:
                    return
                if self._bytes > self.limit_bytes:
                    self._ended = backlog_error(self.limit_bytes)
                    await self._close_events()  # stops the worker's loop: it is free
                    return
        except Exception as exc:
            self._ended = exc
        finally:
            self._done = True
            self._arrived.set()

    async def next(self) -> GenerationEvent | None:
        """What arrived since the last call, as one event; None once the events are over.
        Raises what ended them early, after the events read before it. The caller asks
        again once it sent the last piece: until then that piece counts against the bound
        (a merged piece taken while the client read nothing could hold most of the text,
        then wait in its send, and the bound held only what came after it)."""
        self._bytes -= self._taken
        self._taken = 0
        while not self._waiting and not self._done:
            self._arrived.clear()
            await self._arrived.wait()
        if self._waiting:
            waiting, self._waiting, self._taken = self._waiting, [], self._bytes
            return merged(waiting)
        if self._ended is not None:
            raise self._ended
        return None

    async def close(self) -> None:
        """Stop reading and close the engine's iterator (the generation is cancelled if it
        still runs)."""
        self._pump.cancel()
        with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
            await self._pump
        await self._close_events()

    async def _close_events(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._events.aclose()
