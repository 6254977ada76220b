"""Requests that run in a session, and the upkeep that frees sessions.

The request that starts a sequence goes to any worker (retried once after a crash, since
no state exists yet) and the worker loads a fresh program instance for it; every later
request of the sequence waits for that worker in particular. A crash or a hang of that
worker ends the session with ``SessionEndedError``: its state is gone, and a silent
restart from the initial state would hand the caller wrong answers. ``sequence_end``
frees the instance after answering; expired sessions and replaced ones are freed by
``sweep`` (run by a thread every ``tick_s``), which also replaces workers that died idle.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from pteforge.contracts.runtime_messages import (
    DropRequest,
    ErrorReply,
    InferRequest,
    ProgramState,
)
from pteforge.runtime.errors import (
    InvalidInputError,
    SessionEndedError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from pteforge.runtime.processes import WorkerProcess
from pteforge.runtime.sessions import Sequence as SequenceRef
from pteforge.runtime.sessions import Session, Sessions
from pteforge.runtime.worker_calls import ASYNC_INLINE_FRAME_BYTES, Calls, Reply, Request


class SessionCalls:
    """Sends session requests through ``calls`` and keeps ``sessions`` in step with them."""

    def __init__(self, calls: Calls, sessions: Sessions) -> None:
        self.calls = calls
        self.sessions = sessions
        self.tick_s = max(0.05, min(1.0, sessions.limits.idle_s / 4))
        self._drops: dict[WorkerProcess, list[int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="pteforge-sessions").start()

    async def call(
        self,
        message: InferRequest,
        arrays: Sequence[np.ndarray],
        sequence: SequenceRef,
        state: ProgramState,
    ) -> tuple[Reply, float]:
        """Run the request in ``sequence``'s session; the reply and its queue time (ms).
        Starting it takes the program's planned memory (``state``) of the sessions' limit."""
        if message.profile:
            raise InvalidInputError("profile is not available inside a sequence")
        if sequence.start:
            session, replaced = self.sessions.begin(
                sequence, message.sha256, state.planned_bytes, state.largest_plan()
            )
            if replaced is not None:
                self.drop_later(replaced)
        else:
            session = self.sessions.find(sequence, message.sha256)
        in_session = {"session": session.id, "open": sequence.start, "close": sequence.end}
        message = message.model_copy(update=in_session)
        request = Request(message, arrays, ASYNC_INLINE_FRAME_BYTES, sequence.scope)
        answered = False
        try:
            (reply, outputs), queue_ms = await self.calls.call_async(request, session.worker)
            answered = not isinstance(reply, ErrorReply)
        except (WorkerCrashedError, WorkerTimeoutError) as exc:
            reason = None if sequence.start else self._why_ended(session, exc)
            if reason is None:
                raise
            raise SessionEndedError(reason) from exc
        finally:
            self._settle(session, sequence, request, answered)
        return (reply, outputs), queue_ms

    def _settle(
        self, session: Session, sequence: SequenceRef, request: Request, answered: bool
    ) -> None:
        if sequence.start and answered:
            session.worker = request.served_by
            if not self.sessions.is_active(session):  # restarted meanwhile: free this one
                self.drop_later(session)
        elif sequence.start:
            self.sessions.end(session, None)  # never established: the worker dropped it
        if sequence.end:
            self.sessions.end(
                session, f"{sequence} was ended by sequence_end; start it again to reuse it"
            )
        self.sessions.release(session)

    def _why_ended(self, session: Session, exc: Exception) -> str | None:
        """Why the session ended, if the failure ended it (its worker is gone)."""
        if session.worker in self.calls.workers.live:
            return None  # e.g. its worker stayed busy too long: the session lives on
        reason = self.sessions.ended_reason(session.sequence)
        return reason or f"{session.sequence} ended: {exc}; its state is lost"

    def drop_later(self, session: Session) -> None:
        """Free ``session``'s instance in its worker at the next sweep."""
        if session.worker is not None:
            with self._lock:
                self._drops.setdefault(session.worker, []).append(session.id)

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            self.sweep()

    def sweep(self) -> None:
        """Replace dead idle workers; end expired sessions; free ended ones in their workers."""
        self.calls.workers.sweep()
        for session in self.sessions.expire():
            self.drop_later(session)
        with self._lock:
            pending, self._drops = self._drops, {}
        for worker, ids in pending.items():
            if worker in self.calls.workers.live and not self._drop(worker, ids):
                with self._lock:
                    self._drops.setdefault(worker, []).extend(ids)

    def _drop(self, worker: WorkerProcess, ids: list[int]) -> bool:
        """Tell ``worker`` to free sessions ``ids``; False if it was busy all along."""
        request = Request(DropRequest(drop=tuple(ids)), [], float("inf"))
        held = self.calls.workers.checkout.get(self.tick_s, request, worker)
        if held is None:
            return worker not in self.calls.workers.live
        try:
            if request.error is not None:
                raise request.error
            held.reply(self.calls.timeout_s)
        except (EOFError, OSError, TimeoutError):
            self.calls.workers.lost(held, "it failed while freeing sessions")
            return True
        self.calls.workers.checkout.put(held)
        return True

    def close(self) -> None:
        self._stop.set()
