"""HTTP status (and ``Retry-After``) of each runtime-layer error on /v2.

4xx when the request is at fault (bad input, unknown model or sequence, inputs that crash
the runtime on two workers, a project over its sequence limit); 503 with ``Retry-After``
when the server is (a worker crashed and the retry could not run, hung, none can start,
sessions hold all the memory they may, shutting down).
"""

from __future__ import annotations

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
    CrashingInputError,
    PoolUnavailableError,
    SessionEndedError,
    SessionLimitError,
    SessionLostError,
    SessionMemoryError,
    UnknownSessionError,
)

# Seconds a client should wait before retrying, per server-side failure.
RETRY_AFTER_S: list[tuple[type[RuntimeLayerError], int]] = [
    (PoolUnavailableError, 30),
    (SessionMemoryError, 10),
    (PoolClosedError, 5),
    (WorkerCrashedError, 1),
    (WorkerTimeoutError, 1),
]

_CLIENT: list[tuple[type[RuntimeLayerError], int]] = [
    (CrashingInputError, 422),
    (InvalidInputError, 400),
    (UnknownSessionError, 400),
    (SessionEndedError, 410),
    (SessionLimitError, 429),
    (UnknownMethodError, 404),
]


def status_of(exc: RuntimeLayerError) -> tuple[int, dict[str, str]]:
    """The status and extra headers answering ``exc`` (``NotFoundError``/413 aside)."""
    for cls, status in _CLIENT:
        if isinstance(exc, cls):
            return status, {}
    for cls, seconds in RETRY_AFTER_S:
        if isinstance(exc, cls):
            return 503, {"Retry-After": str(seconds)}
    if isinstance(exc, ArtifactIntegrityError | SessionLostError):
        return 500, {}  # our fault: stored bytes off their hash, pool and worker out of step
    return 422, {}  # the artifact cannot be loaded or fails on these inputs
