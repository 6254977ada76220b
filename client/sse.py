"""An incremental parser of server-sent events (the WHATWG ``text/event-stream`` format).

Fed raw byte chunks as they arrive, it returns the complete events so far; comments
(keep-alives) are dropped. Lines end with LF or CRLF. :class:`EventSink` reads a streamed
answer as such events. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """One dispatched event: its type (``message`` when unnamed), data and ``id`` if any."""

    event: str
    data: str
    id: str | None


class EventParser:
    """Turns byte chunks into :class:`Event` s; keeps the last ``id`` for a resume."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self.last_id: str | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        """The events completed by ``chunk``."""
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        events = []
        for line in lines:
            event = self._line(line.removesuffix(b"\r").decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Event | None:
        if self._id is not None:
            self.last_id = self._id
        if not self._data:
            self._event = ""
            return None
        event = Event(self._event or "message", "\n".join(self._data), self._id)
        self._event, self._data, self._id = "", [], None
        return event


class EventSink:
    """A streamed answer (a ``calls.Sink``) read as events: each goes to :meth:`event`,
    until one returns False."""

    def __init__(self) -> None:
        self._parser = EventParser()
        self.received = 0

    def headers(self) -> dict[str, str]:
        return {}

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        pass

    def feed(self, chunk: bytes) -> bool:
        self.received += len(chunk)
        return all(self.event(event) for event in self._parser.feed(chunk))  # stops at False

    def event(self, event: Event) -> bool:
        """Take one event; False: the stream has ended."""
        raise NotImplementedError
