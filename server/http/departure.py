"""Work for a request whose client may leave before it is answered: cancelled once it does.

Starlette watches for the client leaving only while it streams a response, so a route that
answers once its work is done (a whole completion, whose choices run one after another on a
runtime worker) would run on for nobody: a client that sent ``n`` 16 and left at once held
a worker for sixteen generations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.types import Receive

T = TypeVar("T")


async def unless_client_leaves(receive: Receive, work: Awaitable[T]) -> T | None:
    """What ``work`` answers, or None when the client left first (``work`` is cancelled, its
    own clean-up done). ``receive`` is the request's, its body already read: what it answers
    then is the client leaving."""
    job = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_left(receive))
    try:
        await asyncio.wait((job, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not job.done():
            job.cancel()
            await asyncio.wait((job,))
    return None if job.cancelled() else job.result()


async def _left(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
