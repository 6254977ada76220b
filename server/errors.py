"""The service's exception hierarchy and the ONE place errors become HTTP answers.

Every ``/v1`` error is ``{"error": {"code", "message"}}``. Errors of this layer and of the
layers below (storage, manager, backends, sandbox) are answered here through the one table of
``error_map`` (each exception's declared code and that code's status), so routes just raise.
Anything else is a bug: 500 ``internal_error``. ``/v2`` keeps its own error shape
(the inference router answers ``{"error": "..."}`` itself).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from types import MappingProxyType
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from pteforge.contracts.errors import ErrorCode
from pteforge.contracts.plan_problems import PlanProblem, plan_problem

log = logging.getLogger(__name__)

V2_PREFIX = "/v2/"
_HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_OPENAI_UNSERVED = ("/v1/responses", "/v1/embeddings", "/v1/moderations", "/v1/audio")
"""OpenAI API paths an OpenAI client may call that pteforge does not serve (of
``/v1/responses``, only ``POST`` on the path itself is served)."""


HTTP_STATUS: Mapping[ErrorCode, int] = MappingProxyType(
    {
        ErrorCode.BAD_REQUEST: HTTPStatus.BAD_REQUEST,
        ErrorCode.INVALID_REQUEST: HTTPStatus.UNPROCESSABLE_ENTITY,
        ErrorCode.INVALID_UPLOAD: HTTPStatus.UNPROCESSABLE_ENTITY,
        ErrorCode.UNAUTHORIZED: HTTPStatus.UNAUTHORIZED,
        ErrorCode.NOT_FOUND: HTTPStatus.NOT_FOUND,
        ErrorCode.CONFLICT: HTTPStatus.CONFLICT,
        ErrorCode.PAYLOAD_TOO_LARGE: HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        ErrorCode.UNSUPPORTED_MEDIA_TYPE: HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
        ErrorCode.RANGE_NOT_SATISFIABLE: HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE,
        ErrorCode.TOO_MANY_REQUESTS: HTTPStatus.TOO_MANY_REQUESTS,
        ErrorCode.INVALID_PLAN: HTTPStatus.UNPROCESSABLE_ENTITY,
        ErrorCode.UNKNOWN_BACKEND: HTTPStatus.UNPROCESSABLE_ENTITY,
        ErrorCode.INVALID_OPTIONS: HTTPStatus.UNPROCESSABLE_ENTITY,
        ErrorCode.INVALID_PROGRAM: HTTPStatus.UNPROCESSABLE_ENTITY,
        ErrorCode.UPLOAD_REJECTED: HTTPStatus.BAD_REQUEST,  # a refusal may name its own
        ErrorCode.LOWERING_FAILED: HTTPStatus.UNPROCESSABLE_ENTITY,
        ErrorCode.COMPILE_FAILED: HTTPStatus.UNPROCESSABLE_ENTITY,
        ErrorCode.INSUFFICIENT_STORAGE: HTTPStatus.INSUFFICIENT_STORAGE,
        ErrorCode.INTEGRITY_ERROR: HTTPStatus.INTERNAL_SERVER_ERROR,
        ErrorCode.INTERNAL_ERROR: HTTPStatus.INTERNAL_SERVER_ERROR,
    }
)
"""The HTTP status of each code an exception may declare: the one code -> status table.
(``compile_crashed``, ``out_of_memory`` and ``timeout`` are only ever a failed job's.)"""


class ServiceError(Exception):
    """Root of the errors ``pteforge.server`` raises; each class declares its ``code``, which
    :data:`HTTP_STATUS` answers with its status: ``class X(ServiceError, code=...)``."""

    code: ClassVar[ErrorCode] = ErrorCode.BAD_REQUEST

    def __init_subclass__(cls, *, code: ErrorCode | None = None) -> None:
        super().__init_subclass__()
        if code is not None:
            cls.code = code

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(ServiceError, code=ErrorCode.NOT_FOUND):
    """A missing resource, or one another project owns (indistinguishable on purpose)."""


class UnauthorizedError(ServiceError, code=ErrorCode.UNAUTHORIZED):
    """No valid bearer token."""


class InvalidRequestError(ServiceError, code=ErrorCode.INVALID_REQUEST):
    """A well-formed request whose content is wrong."""


class InvalidUploadError(InvalidRequestError, code=ErrorCode.INVALID_UPLOAD):
    """A multipart upload whose parts are not what the route takes (before any file is read)."""


class PayloadTooLargeError(ServiceError, code=ErrorCode.PAYLOAD_TOO_LARGE):
    """A request body over its size limit."""


class UnsupportedMediaTypeError(ServiceError, code=ErrorCode.UNSUPPORTED_MEDIA_TYPE):
    """A request body of a content type the route does not take."""


class ConflictError(ServiceError, code=ErrorCode.CONFLICT):
    """The request clashes with the current state of a resource."""


class RangeNotSatisfiableError(ServiceError, code=ErrorCode.RANGE_NOT_SATISFIABLE):
    """A ``Range`` outside the content; ``size`` goes into ``Content-Range``."""

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


@dataclass(frozen=True)
class Answer:
    """How one exception is answered: status, wire code, message."""

    status: int
    code: str
    message: str


Answerer = Callable[[BaseException], Answer | None]
"""``error_map.answer``: an exception's answer, or None when it is a bug."""


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    """The pinned error JSON shape."""
    return {"error": {"code": code, "message": message}}


def error_response(request: Request, status: int, code: str, message: str) -> JSONResponse:
    """The error answer; ``/v2`` (Open Inference Protocol) uses its ``{"error": "..."}``."""
    headers = {"WWW-Authenticate": "Bearer"} if status == HTTPStatus.UNAUTHORIZED else None
    body: dict[str, Any] = error_body(code, message)
    if request.url.path.startswith(V2_PREFIX):
        body = {"error": message}
    return JSONResponse(body, status_code=status, headers=headers)


def _coded(request: Request, code: ErrorCode, message: str) -> JSONResponse:
    return error_response(request, HTTP_STATUS[code], code, message)


def _status_code_name(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "http_error"


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path. Starlette's 405 names only the methods
    of the first route that matched the path, while FastAPI adds one route per method."""
    routes = request.app.router.routes
    return [
        method
        for method in _HTTP_METHODS
        if any(r.matches({**request.scope, "method": method})[0] == Match.FULL for r in routes)
    ]


def _routing_message(request: Request, exc: StarletteHTTPException, allowed: list[str]) -> str:
    """The router's bare 'Not Found' and 'Method Not Allowed', in words that name the route
    (a Triton client's GET /v2/models/M/config said only 'Not Found')."""
    where = f"{request.method} {request.url.path}"
    if exc.status_code == 404 and exc.detail == "Not Found":
        return (
            f"no route {where}{_openai_hint(request.url.path)}; every route is listed at "
            "/docs and in docs/http-api.md"
        )
    if exc.status_code == 405 and exc.detail == "Method Not Allowed":
        return f"{where}: the route takes {', '.join(allowed) or 'no method'}"
    return str(exc.detail)


def _openai_hint(path: str) -> str:
    """Which OpenAI routes pteforge serves, for an OpenAI client that called one it lacks
    (a stored response of the Responses API, embeddings); nothing for any other path."""
    if not any(path == p or path.startswith(f"{p}/") for p in _OPENAI_UNSERVED):
        return ""
    return (
        " (of OpenAI's API pteforge serves only /v1/completions, /v1/chat/completions,"
        " POST /v1/responses, which stores no response to read back, and /v1/models)"
    )


def _validation_problem(error: Mapping[str, Any]) -> str:
    """One request-validation problem in words: where it is and what is wrong."""
    loc = [str(p) for p in error.get("loc", ())]
    if error.get("type") == "json_invalid":
        reason = (error.get("ctx") or {}).get("error", "JSON decode error")
        return f"the request body is not valid JSON ({reason} at character {loc[-1]})"
    return f"{'.'.join(loc)}: {error.get('msg', 'invalid')}"


def _plan_problem(errors: Sequence[Any]) -> PlanProblem | None:
    """The first problem of a request body's ``plan`` when every problem is in it."""
    if any(tuple(e.get("loc", ()))[:2] != _PLAN_LOC for e in errors):
        return None
    return plan_problem(errors, root=_PLAN_LOC)


_PLAN_LOC = ("body", "plan")


def install_error_handlers(
    app: FastAPI, answer: Answerer, roots: Sequence[type[Exception]]
) -> None:
    """Answer every exception raised under ``app`` in the pinned error shape: those of
    ``roots`` as ``answer`` says, the rest as bugs."""

    async def on_exception(request: Request, exc: Exception) -> JSONResponse:
        known = answer(exc)
        if known is None:
            log.exception("unhandled error on %s %s", request.method, request.url.path)
            return _coded(
                request, ErrorCode.INTERNAL_ERROR, f"internal error ({type(exc).__name__})"
            )
        response = error_response(request, known.status, known.code, known.message)
        if isinstance(exc, RangeNotSatisfiableError):
            response.headers["Content-Range"] = f"bytes */{exc.size}"
        return response

    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        allowed = _allowed_methods(request) if exc.status_code == 405 else []
        message = _routing_message(request, exc, allowed)
        response = error_response(
            request, exc.status_code, _status_code_name(exc.status_code), message
        )
        for key, value in (exc.headers or {}).items():
            response.headers[key] = value
        if exc.status_code == HTTPStatus.METHOD_NOT_ALLOWED:
            response.headers["Allow"] = ", ".join(allowed)
        return response

    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        plan = _plan_problem(exc.errors())
        if plan is not None:  # worded as the library words it, field as written
            return _coded(request, ErrorCode.INVALID_PLAN, str(plan))
        problems = "; ".join(_validation_problem(e) for e in exc.errors())
        return _coded(request, ErrorCode.INVALID_REQUEST, problems or "invalid request")

    app.add_exception_handler(StarletteHTTPException, on_http)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, on_validation)  # type: ignore[arg-type]
    # Known types go through the exception middleware (answered, not re-raised); the bare
    # Exception handler sits in the server-error middleware, which also logs the bug.
    for exc_type in roots:
        app.add_exception_handler(exc_type, on_exception)
    app.add_exception_handler(Exception, on_exception)
