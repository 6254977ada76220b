"""The server-sent event stream of one job, polled from storage.

Polling the job row (not an in-process signal) is what lets any API process serve the
stream of a job any worker runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from pteforge.server.jobs import service
from pteforge.server.jobs.schemas import JobOut
from pteforge.server.services import Services

_KEEPALIVE_SECONDS = 15.0


def sse_message(event: str, data: str, event_id: int | None = None) -> str:
    """One SSE message (``data`` must be a single line: JSON is)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


async def job_event_stream(
    services: Services, project_id: str, job_id: str, request: Request
) -> AsyncIterator[str]:
    """Yield a ``job`` event whenever the status or stage changes; stop when it ends."""
    poll = services.settings.sse_poll_seconds
    last: tuple[str, str | None] | None = None
    idle = 0.0
    while not await request.is_disconnected():
        job = await run_in_threadpool(service.get_job, services, project_id, job_id)
        current = (job.status.value, job.stage)
        if current != last:
            last, idle = current, 0.0
            yield sse_message(
                "job", json.dumps(JobOut.of(job).model_dump(mode="json")), job.version
            )
        if job.status.terminal:
            yield sse_message("end", json.dumps({"status": job.status.value}))
            return
        if idle >= _KEEPALIVE_SECONDS:
            idle = 0.0
            yield ": keep-alive\n\n"
        await asyncio.sleep(poll)
        idle += poll
