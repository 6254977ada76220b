"""The server-sent event stream of one job, polled from storage.

Polling the job's change log (not an in-process signal) is what lets any API process
serve the stream of a job any worker runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from pteforge.server.auth.dependencies import DEFAULT_TOKEN_TTL_S
from pteforge.server.common.services import Services
from pteforge.server.jobs import service
from pteforge.server.jobs.schemas import JobOut

_KEEPALIVE_SECONDS = 15.0
_TOKEN_CHECK_SECONDS = DEFAULT_TOKEN_TTL_S
"""How long a stream runs on between two checks that its caller's token is still live."""


def sse_message(event: str, data: str, event_id: int | None = None) -> str:
    """One SSE message (``data`` must be a single line: JSON is)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


async def job_event_stream(
    services: Services,
    project_id: str,
    job_id: str,
    request: Request,
    after_version: int = 0,
    authorized: Callable[[], bool] = lambda: True,
) -> AsyncIterator[str]:
    """Yield a ``job`` event for every status or stage change after ``after_version`` (the
    SSE ``id``, so a client resumes with ``Last-Event-ID``); an ``end`` event when the job
    is over. Changes come from the job's log, so none is lost between two polls.

    ``authorized()`` (read in the threadpool) is asked again every ``_TOKEN_CHECK_SECONDS``
    of polling: once the caller's token is revoked, the stream sends an ``error`` event and
    stops, so a client that reconnects is answered 401. A server that is stopping ends the
    stream with no ``end`` (``services.draining``): the client resumes on another replica."""
    poll = services.settings.sse_poll_seconds
    idle = unchecked = 0.0
    while not services.draining.is_set() and not await request.is_disconnected():
        job, events = await run_in_threadpool(
            service.job_events, services, project_id, job_id, after_version
        )
        for event in events:
            after_version, idle = event.version, 0.0
            data = JobOut.at(job, event).model_dump(mode="json")
            yield sse_message("job", json.dumps(data), event.version)
        if job.status.terminal:
            yield sse_message("end", json.dumps({"status": job.status.value}))
            return
        if unchecked >= _TOKEN_CHECK_SECONDS:
            unchecked = 0.0
            if not await run_in_threadpool(authorized):
                yield sse_message("error", json.dumps(_REVOKED))
                return
        if idle >= _KEEPALIVE_SECONDS:
            idle = 0.0
            yield ": keep-alive\n\n"
        await asyncio.sleep(poll)
        idle += poll
        unchecked += poll


_REVOKED = {"code": "unauthorized", "message": "invalid or revoked token"}
