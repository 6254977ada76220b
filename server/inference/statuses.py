"""HTTP status (and ``Retry-After``) of each runtime-layer error on /v2.

4xx when the request is at fault (bad input, unknown model or sequence, inputs that crash
the runtime on two workers, a project over its sequence limit; a project past its budget of
crashed workers, or its requests in flight holding its share of memory: 429 with
``Retry-After``); 503 with ``Retry-After`` when the server is (a worker crashed and the retry
could not run, hung, none can start, sessions or requests in flight hold all the memory they
may, shutting down).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable

from starlette.responses import JSONResponse, Response

from pteforge.runtime import (
    ArtifactIntegrityError,
    InvalidInputError,
    PoolClosedError,
    RuntimeLayerError,
    UnknownMethodError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from pteforge.runtime.errors import (
    CrashBudgetError,
    CrashingInputError,
    PoolUnavailableError,
    SessionEndedError,
    SessionLimitError,
    SessionLostError,
    SessionMemoryError,
    UnknownSessionError,
)
from pteforge.server.http.memory import MemoryRefusal
from pteforge.server.inference.metrics import InferenceMetrics


class NotFoundError(RuntimeLayerError):
    """The model (artifact or method) does not exist for this caller."""


class NotRunnableError(RuntimeLayerError):
    """A method delegated to a backend this host's runtime does not register (422: the
    model is not ready, and never will be here)."""


class InvalidVersionError(RuntimeLayerError):
    """A model version named in a ``/v2`` path that is not a number (400)."""


class RequestTooLargeError(RuntimeLayerError):
    """An infer request body, as sent or once decompressed, is over the size limit (413)."""


# Seconds a client should wait before retrying, per server-side failure (a
# ``PoolUnavailableError`` carries its own: the pool's ``RestartPolicy.retry_after_s``).
RETRY_AFTER_S: list[tuple[type[RuntimeLayerError], int]] = [
    (SessionMemoryError, 10),
    (PoolClosedError, 5),
    (WorkerCrashedError, 1),
    (WorkerTimeoutError, 1),
]

_CLIENT: list[tuple[type[RuntimeLayerError], int]] = [
    (RequestTooLargeError, 413),
    (NotFoundError, 404),
    (InvalidVersionError, 400),
    (CrashingInputError, 422),
    (NotRunnableError, 422),
    (InvalidInputError, 400),
    (UnknownSessionError, 400),
    (SessionEndedError, 410),
    (SessionLimitError, 429),
    (UnknownMethodError, 404),
]


def status_of(exc: RuntimeLayerError) -> tuple[int, dict[str, str]]:
    """HTTP status and extra headers (e.g. ``Retry-After``) answering a runtime-layer error
    on /v2 (and on the generation routes)."""
    for cls, status in _CLIENT:
        if isinstance(exc, cls):
            return status, {}
    if isinstance(exc, CrashBudgetError):  # until its oldest crash leaves the window
        return 429, {"Retry-After": str(math.ceil(exc.retry_after_s))}
    if isinstance(exc, MemoryRefusal):
        retry = exc.retry_after_s
        return exc.status, {} if retry is None else {"Retry-After": str(retry)}
    if isinstance(exc, PoolUnavailableError):
        return 503, {"Retry-After": str(math.ceil(exc.retry_after_s))}
    for cls, seconds in RETRY_AFTER_S:
        if isinstance(exc, cls):
            return 503, {"Retry-After": str(seconds)}
    if isinstance(exc, ArtifactIntegrityError | SessionLostError):
        return 500, {}  # our fault: stored bytes off their hash, pool and worker out of step
    return 422, {}  # the artifact cannot be loaded or fails on these inputs


def error_response(status: int, message: str) -> JSONResponse:
    """The /v2 error body: ``{"error": "..."}``."""
    return JSONResponse({"error": message}, status_code=status)


async def answered(metrics: InferenceMetrics, route: str, work: Awaitable[Response]) -> Response:
    """The response of ``work``, or the /v2 error answering the runtime-layer error it
    raised; either way counted in ``metrics`` under ``route``."""
    try:
        response = await work
    except RuntimeLayerError as exc:
        status, headers = status_of(exc)
        response = error_response(status, str(exc))
        response.headers.update(headers)
    metrics.observe_request(route, response.status_code)
    return response
