"""A generation's replies as the pool reads them from its worker, batched when they queue up.

The worker sends each token's event the moment it is chosen. When the server falls behind
(a busy event loop, a shared CPU), several are already waiting in the pipe by the time it
reads one: they are read at once, without waiting, and handed on as one event (the text
and token ids of all of them, ``GenerationEvent``'s "tokens generated since the previous
event"), so a stream costs one event, one SSE chunk and one socket write for them, not one
each. Nothing is held back for that: a batch is only what had already arrived.
"""

from __future__ import annotations

import select

from pteforge.contracts.generation import GenerationEvent, TokenLogprob
from pteforge.contracts.runtime_messages import GeneratedReply, WorkerReply
from pteforge.runtime.errors import RuntimeLayerError
from pteforge.runtime.processes import WorkerProcess
from pteforge.runtime.wire import recv_reply
from pteforge.runtime.worker_calls import Calls, Request

Ending = WorkerReply | RuntimeLayerError | None
"""What ended a batch other than an event: a reply that is not one (an error), or the
worker crashing or hanging (it has been replaced then)."""


class Replies:
    """The replies of one generation on ``worker``."""

    def __init__(self, calls: Calls, worker: WorkerProcess, request: Request) -> None:
        self.calls = calls
        self.worker = worker
        self.what = request.what
        self.scope = request.scope  # charged with the worker's death
        self._waiting = select.poll()  # one poll object: a syscall a look, no selector built
        self._waiting.register(worker.conn.fileno(), select.POLLIN)

    def ready(self) -> bool:
        """Whether the worker's next message (or its end) is already there."""
        return bool(self._waiting.poll(0))

    async def next(self) -> WorkerReply:
        """The worker's next message; a crash or hang replaces it and raises."""
        try:
            if self.ready():  # already there (the worker runs ahead): no reader dance
                reply, _ = recv_reply(self.worker.conn)
            else:
                reply, _ = await self.worker.reply_async(self.calls.timeout_s)
        except TimeoutError:
            raise self.calls.timed_out(self.worker, self.what, self.scope) from None
        except (EOFError, OSError):
            raise await self.calls.crashed_error(self.worker, self.what, self.scope) from None
        return reply

    async def batch(self) -> tuple[list[GenerationEvent], Ending]:
        """The next event and those already waiting behind it, up to the last one (with a
        ``finish_reason``), and what ended them early if anything did. Raises if the first
        read fails (nothing is lost: nothing was read)."""
        events: list[GenerationEvent] = []
        reply = await self.next()
        while isinstance(reply, GeneratedReply):
            events.append(reply.event)
            if reply.event.finish_reason is not None or not self.ready():
                return events, None
            try:
                reply = await self.next()
            except RuntimeLayerError as exc:  # the events read so far still go out first
                return events, exc
        return events, reply


def merged(events: list[GenerationEvent]) -> GenerationEvent:
    """One event carrying ``events`` in order (the last one's finish reason and usage)."""
    if len(events) == 1:
        return events[0]
    last = events[-1]
    return GenerationEvent(
        text="".join(event.text for event in events),
        token_ids=tuple(token for event in events for token in event.token_ids),
        finish_reason=last.finish_reason,
        usage=last.usage,
        logprobs=None if last.logprobs is None else _logprobs(events),
        prompt_tokens=next((e.prompt_tokens for e in events if e.prompt_tokens is not None), None),
    )


def _logprobs(events: list[GenerationEvent]) -> tuple[TokenLogprob, ...]:
    return tuple(scored for event in events for scored in event.logprobs or ())
