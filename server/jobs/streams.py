"""How many job event streams each project has open (``GET /v1/jobs/{job_id}/events``).

Apart from ``events.py`` (the stream itself) because ``Services`` holds the count.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from functools import partial

from starlette.responses import StreamingResponse

from pteforge.contracts.errors import ErrorCode
from pteforge.server.errors import ServiceError
from pteforge.server.http.release import ReleasedWhenSent


class TooManyStreamsError(ServiceError, code=ErrorCode.TOO_MANY_REQUESTS):
    """The project has as many job event streams open as it may."""


class OpenStreams:
    """Job event streams open per project. Each polls the database every
    ``sse_poll_seconds`` from the shared threadpool, so one project's many streams starved
    everyone (200 streams of one project: another project's ``GET /v1/artifacts`` went
    from 1.8 to 61 ms); past ``per_project`` a new one is refused (429) until one ends."""

    def __init__(self, per_project: int) -> None:
        self.per_project = per_project
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def response(self, project: str, stream: AsyncIterator[str]) -> EventStreamResponse:
        """``stream`` as the answer, counted among ``project``'s open streams until it is
        over; ``TooManyStreamsError`` now if the project has as many open as it may."""
        with self._lock:
            held = self._open.get(project, 0)
            if held >= self.per_project:
                raise TooManyStreamsError(
                    f"this project has {held} job event streams open, as many as it may "
                    "(PTEFORGE_EVENT_STREAMS_PER_PROJECT): close one, or poll GET "
                    "/v1/jobs/{job_id}"
                )
            self._open[project] = held + 1
        return EventStreamResponse(stream, partial(self._close, project))

    def _close(self, project: str) -> None:
        with self._lock:
            self._open[project] -= 1


class EventStreamResponse(ReleasedWhenSent, StreamingResponse):
    """A job's event stream that calls ``release`` once it is over, however it ends."""

    def __init__(self, stream: AsyncIterator[str], release: Callable[[], None]) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(stream, media_type="text/event-stream", headers=headers)
        self.release = release
