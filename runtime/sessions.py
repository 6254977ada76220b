"""Sessions: the Open Inference Protocol sequence extension, as the pool keeps them.

A session is one loaded instance of a program, held by one runtime worker, that every
request of the sequence runs on, so its methods share the program's mutable state. The
registry here only does the bookkeeping: which sequence ids (scoped by the caller's
project) are active, on which worker, how many bytes they hold, when they were last used,
and why an ended one ended (so that a late request gets a precise answer). The pool talks
to the workers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from typing import Any, ClassVar

from pteforge.runtime.errors import (
    SessionEndedError,
    SessionLimitError,
    SessionMemoryError,
    UnknownSessionError,
)
from pteforge.runtime.lru import ByteLRU

_ENDED_KEPT = 10_000  # ended sequences remembered, to say why they ended


@dataclass(frozen=True)
class SessionLimits:
    """Bounds on sessions: idle lifetime, how many per scope, bytes all of them may hold, and
    bytes one scope's may hold (None: all of ``total_bytes``), so that one project cannot
    take the whole budget from the others."""

    idle_s: float = 300.0
    per_scope: int = 16
    total_bytes: int = 1 << 30
    per_scope_bytes: int | None = None


@dataclass(frozen=True)
class Sequence:
    """What a request says about its sequence: id (scoped), and whether it starts/ends it."""

    scope: str
    id: int | str
    start: bool = False
    end: bool = False
    kind: ClassVar[str] = "sequence"
    """What it is called in errors."""
    how_to_end: ClassVar[str] = "end one with sequence_end or let it expire"
    """What a caller over its project's limit can do."""

    @property
    def key(self) -> tuple[str, str]:
        return self.scope, f"{type(self.id).__name__}:{self.id}"

    def __str__(self) -> str:
        return f"{self.kind} {self.id!r}"


@dataclass(frozen=True)
class GenerationSession(Sequence):
    """A text generation's session (``id``: its key, ``X-Pteforge-Session``): counted with
    the scope's sequences, but apart from them (a /v2 sequence id ``"generate:KEY"`` named
    this session, and its steps ran on the generation's KV cache)."""

    kind: ClassVar[str] = "generation session"
    how_to_end: ClassVar[str] = "let one expire"

    @property
    def key(self) -> tuple[str, str]:
        return self.scope, f"generate:{self.id}"


@dataclass(eq=False)
class Session:
    """One active sequence: its program, its instance's bytes, and the worker holding it."""

    id: int
    sequence: Sequence
    sha256: str
    nbytes: int
    worker: Any = None  # the WorkerProcess, once the starting request succeeded
    last_used: float = 0.0
    busy: int = 0


class Sessions:
    """The active sessions and the reasons of recently ended ones (thread-safe)."""

    def __init__(self, limits: SessionLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self._active: dict[tuple[str, str], Session] = {}
        self._ended: ByteLRU[tuple[str, str], str] = ByteLRU(_ENDED_KEPT)
        self._ids = count(1)
        self._lock = threading.Lock()

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(s.nbytes for s in self._active.values())

    def __len__(self) -> int:
        return len(self._active)

    def begin(
        self, sequence: Sequence, sha256: str, nbytes: int, why: str = ""
    ) -> tuple[Session, Session | None]:
        """Register a new session (busy); the one it replaces (same id, now ended), if any.
        Raises ``SessionLimitError`` or ``SessionMemoryError`` naming the limit (and ``why``
        the program needs ``nbytes``, e.g. ``ProgramState.largest_plan``)."""
        with self._lock:
            old = self._active.get(sequence.key)
            others = [s for s in self._active.values() if s is not old]
            self._check_limits(sequence, nbytes, others, why)
            if old is not None:
                self._forget(old, f"{sequence} was restarted by a new sequence_start")
            session = Session(next(self._ids), sequence, sha256, nbytes, last_used=self.clock())
            session.busy = 1
            self._active[sequence.key] = session
            self._ended.pop(sequence.key)
        return session, old

    def _check_limits(
        self, sequence: Sequence, nbytes: int, others: list[Session], why: str
    ) -> None:
        scoped = [s for s in others if s.sequence.scope == sequence.scope]
        mine = len(scoped)
        if mine >= self.limits.per_scope:
            raise SessionLimitError(
                f"cannot start {sequence}: this project already has {mine} open sessions "
                f"(/v2 sequences and generation sessions), the limit per project "
                f"({self.limits.per_scope}); {sequence.how_to_end} ({self.limits.idle_s:.0f}s idle)"
            )
        share = self.limits.per_scope_bytes
        held_here = sum(s.nbytes for s in scoped)
        if share is not None and held_here + nbytes > share:
            raise SessionLimitError(
                f"cannot start {sequence}: its program's planned memory is {_mib(nbytes)} and "
                f"this project's open sessions hold {_mib(held_here)} of the {_mib(share)} one "
                "project may use (PTEFORGE_SESSION_MEMORY_BYTES_PER_PROJECT); "
                f"{sequence.how_to_end}{'; ' + why if why else ''}"
            )
        held = sum(s.nbytes for s in others)
        if held + nbytes > self.limits.total_bytes:
            raise SessionMemoryError(
                f"cannot start {sequence}: its program's planned memory is {_mib(nbytes)} and "
                f"open sequences hold {_mib(held)} of the {_mib(self.limits.total_bytes)} all "
                "sequences may use (the server-wide session memory limit, "
                f"PTEFORGE_SESSION_MEMORY_BYTES){'; ' + why if why else ''}"
            )

    def find(self, sequence: Sequence, sha256: str) -> Session:
        """The active session of ``sequence``, marked busy; raises if there is none."""
        with self._lock:
            session = self._active.get(sequence.key)
            if session is None:
                ended = self._ended.get(sequence.key)
                if ended is not None:
                    raise SessionEndedError(ended)
                raise UnknownSessionError(f"{sequence} is not active: start it with sequence_start")
            if session.sha256 != sha256 or session.worker is None:
                what = "runs another artifact" if session.sha256 != sha256 else "is starting"
                raise UnknownSessionError(f"{sequence} {what}; this request cannot join it")
            session.busy += 1
        return session

    def is_active(self, session: Session) -> bool:
        with self._lock:
            return self._active.get(session.sequence.key) is session

    def ended_reason(self, sequence: Sequence) -> str | None:
        """Why ``sequence`` ended, if it ended recently and was not started again."""
        with self._lock:
            return None if sequence.key in self._active else self._ended.get(sequence.key)

    def release(self, session: Session) -> None:
        """The request that marked ``session`` busy is done with it."""
        with self._lock:
            session.busy -= 1
            session.last_used = self.clock()

    def end(self, session: Session, reason: str | None) -> None:
        """End ``session``; ``reason`` (None: forget it silently) answers later requests."""
        with self._lock:
            if self._active.get(session.sequence.key) is session:
                self._forget(session, reason)

    def _forget(self, session: Session, reason: str | None) -> None:
        del self._active[session.sequence.key]
        if reason is not None:
            self._ended.put(session.sequence.key, reason, 1)

    def others_on(self, worker: Any, scope: str) -> bool:
        """Whether ``worker`` holds a session of a scope other than ``scope``."""
        with self._lock:
            return any(
                s.worker is worker and s.sequence.scope != scope for s in self._active.values()
            )

    def end_on_worker(self, worker: Any, reason: str) -> list[Session]:
        """End every session held by ``worker`` (it was lost), saying ``reason``."""
        with self._lock:
            lost = [s for s in self._active.values() if s.worker is worker]
            for session in lost:
                self._forget(session, f"{session.sequence} ended: {reason}; its state is lost")
        return lost

    def expire(self) -> list[Session]:
        """End the sessions idle for longer than ``limits.idle_s``; they are returned."""
        now = self.clock()
        with self._lock:
            stale = [
                s
                for s in self._active.values()
                if s.busy == 0 and s.worker is not None and now - s.last_used > self.limits.idle_s
            ]
            for session in stale:
                idle = now - session.last_used
                self._forget(
                    session,
                    f"{session.sequence} expired after {idle:.0f}s idle (the limit is "
                    f"{self.limits.idle_s:.0f}s); its state is gone, start it again with "
                    "sequence_start",
                )
        return stale


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB"
