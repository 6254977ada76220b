"""Callers waiting for an item, served by scope in turns (``Checkout``'s queue).

A caller waits for any item (a general caller) or for one item in particular (a session's
worker). Every scope (a project) with a caller of either kind has a turn; the scopes take
turns in the order they came. A returned item goes to the first scope in turn that has a
caller for it (its caller for that very item first, else its longest-waiting general
caller that takes it: a retry after a crash takes only some), and that scope goes last.
So a project whose sessions all live on one worker, and that queues turn after turn on
them, holds that worker for one of its turns at a time, not until its backlog is empty: a
caller of another project waits behind one turn per scope.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar


class Scoped(Protocol):
    """A waiting caller: the scope whose turn it waits for, and which items it takes."""

    @property
    def scope(self) -> str:
        """The caller's scope (a project)."""
        ...

    def fits(self, item: Any) -> bool:
        """Whether the caller takes ``item`` (a general caller may take only some)."""
        ...


W = TypeVar("W")
C = TypeVar("C", bound=Scoped)


class Turns(Generic[W, C]):
    """Callers ``C`` waiting for items ``W``, general ones in one FIFO per scope, targeted
    ones in one FIFO per item; not thread-safe (``Checkout`` holds its lock)."""

    def __init__(self) -> None:
        self._general: dict[str, deque[C]] = {}
        self._targeted: dict[W, deque[C]] = {}
        self._turns: dict[str, int] = {}  # callers per scope; insertion order: whose turn

    def __iter__(self) -> Iterator[C]:
        for queue in (*self._general.values(), *self._targeted.values()):
            yield from queue

    def append(self, caller: C, item: W | None = None) -> None:
        """Queue ``caller`` for ``item`` (any item when None); a new scope's turn is last."""
        if item is None:
            self._general.setdefault(caller.scope, deque()).append(caller)
        else:
            self._targeted.setdefault(item, deque()).append(caller)
        self._turns[caller.scope] = self._turns.get(caller.scope, 0) + 1

    def next_for(self, item: W) -> C | None:
        """The caller ``item`` goes to, taken out (its scope goes last); None if none wants it."""
        targeted = self._targeted.get(item, deque())
        for scope in self._turns:
            caller = next((c for c in targeted if c.scope == scope), None)
            if caller is not None:
                self._take(targeted, caller, item)
            elif scope in self._general:
                caller = _first_fitting(self._general[scope], item)
                if caller is None:
                    continue
                self._take_general(caller)
            else:
                continue
            left = self._turns.pop(scope) - 1
            if left:
                self._turns[scope] = left  # back in line, behind the others
            return caller
        return None

    def remove(self, caller: C) -> bool:
        """Take out ``caller`` (the other scopes keep their turns); False if not here."""
        queue = self._general.get(caller.scope)
        if queue is not None and caller in queue:
            self._take_general(caller)
        else:
            found = next((i for i, q in self._targeted.items() if caller in q), None)
            if found is None:
                return False
            self._take(self._targeted[found], caller, found)
        self._left(caller.scope)
        return True

    def drain_general(self) -> list[C]:
        """Every general caller, taken out."""
        callers = [caller for queue in self._general.values() for caller in queue]
        self._general.clear()
        for caller in callers:
            self._left(caller.scope)
        return callers

    def drain_item(self, item: W) -> list[C]:
        """Every caller waiting for ``item`` in particular, taken out."""
        callers = list(self._targeted.pop(item, ()))
        for caller in callers:
            self._left(caller.scope)
        return callers

    def waiting(self) -> dict[str, int]:
        """How many callers wait per scope."""
        return dict(self._turns)

    def _take(self, queue: deque[C], caller: C, item: W) -> None:
        queue.remove(caller)
        if not queue:
            del self._targeted[item]

    def _take_general(self, caller: C) -> None:
        queue = self._general[caller.scope]
        queue.remove(caller)
        if not queue:
            del self._general[caller.scope]

    def _left(self, scope: str) -> None:
        """One caller of ``scope`` left without its turn: the scope keeps its place."""
        left = self._turns[scope] - 1
        if left:
            self._turns[scope] = left
        else:
            del self._turns[scope]


def _first_fitting(queue: deque[C], item: object) -> C | None:
    """The longest-waiting caller of ``queue`` that takes ``item`` (nearly always the first)."""
    if queue[0].fits(item):
        return queue[0]
    return next((caller for caller in queue if caller.fits(item)), None)
