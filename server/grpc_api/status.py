"""The one table from the service's errors to gRPC status codes.

An exception's HTTP status comes from where /v2 and /v1 already read it (runtime-layer
errors: ``server/inference/statuses.py``; every other layer: ``server/error_map.py``), and
``GRPC_CODE`` turns that status into a gRPC code, so HTTP and gRPC cannot disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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


SERVICE_NAME = "inference.GRPCInferenceService"

C = TypeVar("C", bound=type)


def _unimplemented(rpc_name: str, served: str) -> Callable[..., Awaitable[Any]]:
    message = f"{SERVICE_NAME}/{rpc_name} is not implemented by pteforge (it serves {served})"

    async def refuse(self: object, request: object, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, message)

    return refuse


def refuse_unimplemented(base: type) -> Callable[[C], C]:
    """A class decorator: every RPC of the generated ``base`` servicer that the class does
    not define answers UNIMPLEMENTED naming the RPC and what is served (the generated
    stubs answer "Unexpected <class 'NotImplementedError'>")."""

    def decorate(servicer: C) -> C:
        rpcs = [name for name in vars(base) if not name.startswith("_")]
        served = ", ".join(name for name in rpcs if name in vars(servicer))
        for name in rpcs:
            if name not in vars(servicer):
                setattr(servicer, name, _unimplemented(name, served))
        return servicer

    return decorate
