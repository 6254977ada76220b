"""Generation requests from the pool's side: one worker streams a generation's events.

``GenerationCalls.stream`` holds one worker for the whole generation and yields its events
as they arrive over the pipe (those that queued up while the server was busy as one event:
``generation_replies``). Closing the iterator early (a client that disconnected, a
cancelled task) sends the worker a ``CancelRequest``: it stops at its next token, and a
thread reads what it sent meanwhile up to its ``CancelledReply`` and hands the worker
back. A worker that crashes or hangs mid-stream is replaced like any other
(``Calls.crashed``, ``Calls.timed_out``); a generation is never retried, its first tokens
may already be on their way to the client.

With a session key, the generation runs on that session's instance, whose KV cache stays
between requests: a session that does not exist (never started, expired, or lost with its
worker) is started, since every request carries its whole prompt and the cache only saves
recomputing it. Sessions count against the same limits as the sequence extension's, and
so do the generations under way of one scope (a project): one more is refused with
``SessionLimitError`` (429) rather than queued without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.contracts.runtime_messages import (
    BlobFile,
    CancelledReply,
    CancelRequest,
    ErrorReply,
    GenerateRequest,
    WorkerReply,
)
from pteforge.runtime.artifact_files import ArtifactSource
from pteforge.runtime.errors import (
    ERROR_KINDS,
    ArtifactIntegrityError,
    RuntimeLayerError,
    SessionEndedError,
    SessionLimitError,
    UnknownSessionError,
    WorkerTimeoutError,
)
from pteforge.runtime.generation_replies import Replies, merged
from pteforge.runtime.processes import WorkerProcess
from pteforge.runtime.session_calls import SessionCalls
from pteforge.runtime.sessions import GenerationSession, Sequence, Session
from pteforge.runtime.wire import encode_message
from pteforge.runtime.worker_calls import ASYNC_INLINE_FRAME_BYTES, Calls, Request

if TYPE_CHECKING:
    from pteforge.runtime.pool import RuntimePool

_CANCEL = encode_message(CancelRequest(), [])

Blob = tuple[str, ArtifactSource]
"""A file by sha256 and where to get it, as the pool takes artifacts."""


async def generate(
    pool: RuntimePool,
    program: Blob,
    request: GenerationRequest,
    tokenizer: Blob,
    tokenizer_config: Blob | None,
    method: str,
    scope: str,
) -> AsyncGenerator[GenerationEvent, None]:
    """``RuntimePool.generate_async``: the files reach the workers' directory, then the
    generation streams (in the request's session, scoped by ``scope``, if it names one)."""
    sha256, source = program
    await pool.method_metadata_async(sha256, method, source, scope)  # an unknown name fails
    message = GenerateRequest(
        sha256=sha256,
        path=str(await pool.files.local_async(sha256, source)),
        method=method,
        tokenizer=await _blob_file(pool, tokenizer),
        tokenizer_config=await _blob_file(pool, tokenizer_config) if tokenizer_config else None,
        request=request,
        seconds=pool.request_timeout_s,
    )
    # Apart from /v2 sequence ids, but in the same scope: the same per-project limits.
    sequence = None if request.session is None else GenerationSession(scope, request.session)
    nbytes = pool.described(sha256, source, scope).state.planned_bytes
    try:
        async with contextlib.aclosing(
            pool.generation.stream(message, scope, sequence, nbytes)
        ) as events:
            async for event in events:  # closed with this one: the worker stops at once
                yield event
    except ArtifactIntegrityError:  # a corrupt copy: fetched again next time
        for blob in (program, tokenizer, tokenizer_config):
            if blob is not None:
                pool.files.drop(blob[0])
        raise


async def _blob_file(pool: RuntimePool, blob: Blob) -> BlobFile:
    path: Path = await pool.files.local_async(*blob)
    return BlobFile(sha256=blob[0], path=str(path))


class GenerationCalls:
    """Streams generations through ``calls``; ``session_calls`` keeps their sessions."""

    def __init__(self, calls: Calls, session_calls: SessionCalls) -> None:
        self.calls = calls
        self.session_calls = session_calls
        self._streams: dict[str, int] = {}  # generations under way, per scope
        self._lock = threading.Lock()

    async def stream(
        self, message: GenerateRequest, scope: str, sequence: Sequence | None, nbytes: int
    ) -> AsyncGenerator[GenerationEvent, None]:
        """The events of ``message``'s generation, in ``sequence``'s session if given;
        ``SessionLimitError`` if ``scope`` already has as many under way (or waiting for
        a worker) as it may hold sessions."""
        if sequence is None:
            events = self._events(Request(message, [], ASYNC_INLINE_FRAME_BYTES, scope))
        else:
            events = self._in_session(message, sequence, nbytes)
        with self._slot(scope):
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event

    @contextlib.contextmanager
    def _slot(self, scope: str) -> Iterator[None]:
        limit = self.session_calls.sessions.limits.per_scope
        with self._lock:
            held = self._streams.get(scope, 0)
            if held >= limit:
                raise SessionLimitError(
                    f"this project already has {held} generations under way, the limit per "
                    f"project ({limit}); retry once one has ended"
                )
            self._streams[scope] = held + 1
        try:
            yield
        finally:
            with self._lock:
                self._streams[scope] -= 1
                if not self._streams[scope]:
                    del self._streams[scope]

    async def _in_session(
        self, message: GenerateRequest, sequence: Sequence, nbytes: int
    ) -> AsyncGenerator[GenerationEvent, None]:
        session, opening = self._session(sequence, message.sha256, nbytes)
        update = {"session": session.id, "open": opening}
        message = message.model_copy(update=update)
        request = Request(message, [], ASYNC_INLINE_FRAME_BYTES, sequence.scope)
        events = self._events(request, None if opening else session.worker)
        failed = True  # unless it ends well or is closed early (the worker keeps it then)
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event
            failed = False
        except (GeneratorExit, asyncio.CancelledError):
            failed = False
            raise
        finally:
            self._settle(session, opening, request, failed)

    def _session(self, sequence: Sequence, sha256: str, nbytes: int) -> tuple[Session, bool]:
        sessions = self.session_calls.sessions
        try:
            return sessions.find(sequence, sha256), False
        except (UnknownSessionError, SessionEndedError):
            session, replaced = sessions.begin(sequence, sha256, nbytes)
            if replaced is not None:
                self.session_calls.drop_later(replaced)
            return session, True

    def _settle(self, session: Session, opening: bool, request: Request, failed: bool) -> None:
        sessions = self.session_calls.sessions
        worker = request.served_by
        if opening and not failed and worker in self.calls.workers.live:
            session.worker = worker  # it holds the instance
            if not sessions.is_active(session):  # restarted meanwhile: free this one
                self.session_calls.drop_later(session)
        elif opening:
            sessions.end(session, None)  # never established: the worker dropped it, or died
        sessions.release(session)

    async def _events(
        self, request: Request, pinned: WorkerProcess | None = None
    ) -> AsyncGenerator[GenerationEvent, None]:
        replies = Replies(self.calls, await self._acquire(request, pinned), request)
        worker: WorkerProcess | None = replies.worker
        try:
            while worker is not None:
                try:
                    events, ending = await replies.batch()
                except RuntimeLayerError:  # the worker was replaced
                    worker = None
                    raise
                if isinstance(ending, RuntimeLayerError):  # replaced, after these events
                    worker = None
                elif ending is not None or events[-1].finish_reason is not None:
                    self.calls.workers.checkout.put(worker)
                    worker = None
                if events:
                    yield merged(events)
                if ending is not None:
                    raise ending if isinstance(ending, RuntimeLayerError) else _error(ending)
        finally:
            if worker is not None:  # closed early: stop the worker's loop, then free it
                args = (worker, request.scope)
                threading.Thread(target=self._cancel, args=args, daemon=True).start()

    async def _acquire(self, request: Request, pinned: WorkerProcess | None) -> WorkerProcess:
        calls = self.calls
        calls.budget.check(request.scope)  # past its crash budget: refused before a worker
        calls.workers.check()
        request.budget = calls.budget  # and if it runs out while this one waits
        checkout = calls.workers.checkout
        got = await checkout.get_async(calls.timeout_s, request, pinned)
        if got is None:
            raise WorkerTimeoutError(f"no runtime worker became free within {calls.timeout_s:.0f}s")
        if request.refused is not None:  # nothing was sent
            checkout.put(got)
            raise request.refused
        if not request.inline:
            try:
                request.error = await asyncio.to_thread(got.send, request.frame)
            except BaseException:  # cancelled mid-write: the worker's state is unknown
                calls.workers.lost(got, "the conversation with it broke off")
                raise
        request.served_by = got
        if request.error is not None:
            await self._crashed(got, request)
        return got

    async def _crashed(self, worker: WorkerProcess, request: Request) -> NoReturn:
        raise await self.calls.crashed_error(worker, request.what, request.scope)

    def _cancel(self, worker: WorkerProcess, scope: str) -> None:
        """Stop ``worker``'s generation and read up to its ``CancelledReply``; then it is
        free again (or replaced, if it died or hung meanwhile, charged to ``scope``). Runs
        in a thread of its own: whatever becomes of the caller's event loop, the worker
        comes back."""
        what = "cancelling a generation"
        try:
            if worker.send(_CANCEL) is not None:
                raise EOFError
            while True:
                reply, _ = worker.reply(self.calls.timeout_s)
                if isinstance(reply, CancelledReply):
                    break
        except TimeoutError:
            self.calls.timed_out(worker, what, scope)
            return
        except (EOFError, OSError, RuntimeLayerError):
            with contextlib.suppress(RuntimeLayerError):  # the pool closed meanwhile
                self.calls.crashed(worker, what, scope)
            return
        self.calls.workers.checkout.put(worker)


def _error(reply: WorkerReply) -> RuntimeLayerError:
    if isinstance(reply, ErrorReply):
        return ERROR_KINDS.get(reply.error, RuntimeLayerError)(reply.message)
    return RuntimeLayerError(f"a runtime worker answered {reply.kind!r} to a generation")
