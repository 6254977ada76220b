"""The service's exception hierarchy and the ONE place errors become HTTP answers.

Every ``/v1`` error is ``{"error": {"code", "message"}}``. Errors of the layers below
(storage, manager, backends, sandbox) are translated here, by type, so routes just raise.
Anything untranslated is a bug: 500 ``internal_error``. ``/v2`` keeps its own error shape
(the inference router answers ``{"error": "..."}`` itself).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

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


class ServiceError(Exception):
    """Root of the errors ``pteforge.server`` raises; each knows its status and code.

    A subclass names both in its header: ``class X(ServiceError, status=..., code=...)``."""

    status: int = HTTPStatus.BAD_REQUEST
    code: str = ErrorCode.BAD_REQUEST

    def __init_subclass__(cls, *, status: int | None = None, code: str | None = None) -> None:
        super().__init_subclass__()
        if status is not None:
            cls.status = status
        if code is not None:
            cls.code = code

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class NotFoundError(ServiceError, status=HTTPStatus.NOT_FOUND, code=ErrorCode.NOT_FOUND):
    """A missing resource, or one another project owns (indistinguishable on purpose)."""


class UnauthorizedError(ServiceError, status=HTTPStatus.UNAUTHORIZED, code=ErrorCode.UNAUTHORIZED):
    """No valid bearer token."""


class InvalidRequestError(
    ServiceError, status=HTTPStatus.UNPROCESSABLE_ENTITY, code=ErrorCode.INVALID_REQUEST
):
    """A well-formed request whose content is wrong."""


class PayloadTooLargeError(
    ServiceError, status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE, code=ErrorCode.PAYLOAD_TOO_LARGE
):
    """A request body over its size limit."""


class UnsupportedMediaTypeError(
    ServiceError, status=HTTPStatus.UNSUPPORTED_MEDIA_TYPE, code=ErrorCode.UNSUPPORTED_MEDIA_TYPE
):
    """A request body of a content type the route does not take."""


class ConflictError(ServiceError, status=HTTPStatus.CONFLICT, code=ErrorCode.CONFLICT):
    """The request clashes with the current state of a resource."""


class RangeNotSatisfiableError(
    ServiceError,
    status=HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE,
    code=ErrorCode.RANGE_NOT_SATISFIABLE,
):
    """A ``Range`` outside the content; ``size`` goes into ``Content-Range``."""

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


@dataclass(frozen=True)
class Translation:
    """How one foreign exception type is answered."""

    exc_type: type[Exception]
    status: int | Callable[[BaseException], int]
    code: str | Callable[[BaseException], str]
    message: Callable[[BaseException], str] = str


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


def to_service_error(exc: BaseException, translations: list[Translation]) -> ServiceError | None:
    """The service error a foreign exception stands for, or None when it is a bug."""
    if isinstance(exc, ServiceError):
        return exc
    for item in translations:
        if isinstance(exc, item.exc_type):
            code = item.code if isinstance(item.code, str) else item.code(exc)
            err = ServiceError(item.message(exc) or type(exc).__name__, code=code)
            err.status = item.status if isinstance(item.status, int) else item.status(exc)
            return err
    return None


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


def install_error_handlers(app: FastAPI, translations: list[Translation]) -> None:
    """Answer every exception raised under ``app`` in the pinned error shape."""

    async def on_exception(request: Request, exc: Exception) -> JSONResponse:
        err = to_service_error(exc, translations)
        if err is None:
            log.exception("unhandled error on %s %s", request.method, request.url.path)
            return error_response(
                request, 500, ErrorCode.INTERNAL_ERROR, f"internal error ({type(exc).__name__})"
            )
        response = error_response(request, int(err.status), err.code, err.message)
        if isinstance(err, RangeNotSatisfiableError):
            response.headers["Content-Range"] = f"bytes */{err.size}"
        return response

    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = error_response(
            request, exc.status_code, _status_code_name(exc.status_code), exc.detail
        )
        for key, value in (exc.headers or {}).items():
            response.headers[key] = value
        if exc.status_code == HTTPStatus.METHOD_NOT_ALLOWED:
            response.headers["Allow"] = ", ".join(_allowed_methods(request))
        return response

    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        plan = _plan_problem(exc.errors())
        if plan is not None:  # worded as the library words it, field as written
            return error_response(request, 422, ErrorCode.INVALID_PLAN, str(plan))
        problems = "; ".join(_validation_problem(e) for e in exc.errors())
        return error_response(
            request, 422, ErrorCode.INVALID_REQUEST, problems or "invalid request"
        )

    app.add_exception_handler(StarletteHTTPException, on_http)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, on_validation)  # type: ignore[arg-type]
    # Known types go through the exception middleware (answered, not re-raised); the bare
    # Exception handler sits in the server-error middleware, which also logs the bug.
    handled: list[type[Exception]] = [ServiceError, *(item.exc_type for item in translations)]
    for exc_type in handled:
        app.add_exception_handler(exc_type, on_exception)
    app.add_exception_handler(Exception, on_exception)
