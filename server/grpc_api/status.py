"""The one table from the service's errors to gRPC status codes.

An exception's HTTP status comes from where /v2 and /v1 already read it (runtime-layer
errors: ``server/inference/statuses.py``; every other layer: ``server/error_map.py``), and
``GRPC_CODE`` turns that status into a gRPC code, so HTTP and gRPC cannot disagree.
"""

from __future__ import annotations

import logging

import grpc

from pteforge.runtime import RuntimeLayerError
from pteforge.server import error_map
from pteforge.server.inference.statuses import status_of

log = logging.getLogger(__name__)

GRPC_CODE: dict[int, grpc.StatusCode] = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    409: grpc.StatusCode.ALREADY_EXISTS,
    410: grpc.StatusCode.FAILED_PRECONDITION,  # the sequence ended or expired
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    422: grpc.StatusCode.INVALID_ARGUMENT,  # inputs the program refuses or crashes on
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    500: grpc.StatusCode.INTERNAL,
    503: grpc.StatusCode.UNAVAILABLE,
}
"""gRPC code of each HTTP status the service answers with (any other: UNKNOWN)."""


def grpc_status(exc: Exception) -> tuple[grpc.StatusCode, str]:
    """The gRPC code and message answering ``exc`` (INTERNAL, logged, for a bug)."""
    if isinstance(exc, RuntimeLayerError):
        status, _ = status_of(exc)
        return GRPC_CODE.get(status, grpc.StatusCode.UNKNOWN), str(exc)
    answer = error_map.answer(exc)
    if answer is None:
        log.exception("gRPC request failed", exc_info=exc)
        return grpc.StatusCode.INTERNAL, "internal error"
    return GRPC_CODE.get(answer.status, grpc.StatusCode.UNKNOWN), answer.message
