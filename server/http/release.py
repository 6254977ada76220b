"""Answers that give back what their request held once they are sent.

A request may hold something until its answer is out, not only until its handler returns: a
share of request memory (``memory.py``) while a large answer goes to a slow reader, a job
event stream's slot (``server/jobs/streams.py``) while the stream runs. Starlette's
background tasks run only after a send that succeeded, and a generator's ``finally`` not at
all for a stream that never started, so the release sits in ``__call__`` itself.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.responses import Response
from starlette.types import Receive, Scope, Send


class ReleasedWhenSent(Response):
    """A ``Response`` (mixed in before another ``Response`` class, such as
    ``StreamingResponse``) that calls ``release()`` once it is sent, however sending ends:
    done, the client gone, the server stopping."""

    release: Callable[[], None]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()
