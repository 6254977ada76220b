"""Errors of the OpenAI routes, answered in OpenAI's shape:
``{"error": {"message", "type", "param", "code"}}``.

The status of an exception comes from the tables the rest of the server uses: the one error
table (``error_map.answer``) for the service's own errors (401, 404, ...) and
``inference/statuses.py`` for the runtime's (400 for a prompt longer than the context, 429,
503 with ``Retry-After``); ``type`` is the OpenAI error type of that status.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse

from pteforge.runtime import RuntimeLayerError
from pteforge.runtime.errors import ContextLengthError
from pteforge.server import error_map
from pteforge.server.inference.statuses import status_of

log = logging.getLogger(__name__)

_TYPES: Mapping[int, str] = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


class OpenAIError(Exception):
    """An answer of the OpenAI routes: status, message, the parameter at fault, a code."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """OpenAI's error object."""
        kind = _TYPES.get(self.status)
        if kind is None:
            kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {
            "error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}
        }

    def response(self) -> JSONResponse:
        """The error as an HTTP answer."""
        headers = dict(self.headers)
        if self.status == HTTPStatus.UNAUTHORIZED:
            headers["WWW-Authenticate"] = "Bearer"
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def invalid_body(exc: ValidationError) -> OpenAIError:
    """The first problem of a request body, naming its field."""
    error = exc.errors()[0]
    loc = [str(part) for part in error.get("loc", ())]
    param = loc[0] if loc else None
    if error.get("type") == "extra_forbidden" and len(loc) == 1:
        return OpenAIError(400, f"Unrecognized request argument supplied: {loc[0]}", param)
    where = ".".join(loc) or "body"
    return OpenAIError(400, f"{where}: {error.get('msg', 'invalid')}", param)


def as_openai(exc: Exception) -> OpenAIError | None:
    """The OpenAI answer of an exception raised while serving, or None for a bug."""
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, ValidationError):
        return invalid_body(exc)
    if isinstance(exc, HTTPException):  # 503 before the runtime started
        return OpenAIError(exc.status_code, str(exc.detail))
    if isinstance(exc, RuntimeLayerError):
        status, headers = status_of(exc)
        code = "context_length_exceeded" if isinstance(exc, ContextLengthError) else None
        return OpenAIError(status, str(exc), code=code, headers=headers)
    answer = error_map.answer(exc)
    if answer is None:
        return None
    return OpenAIError(answer.status, answer.message, code=answer.code)


def answer_of(exc: Exception) -> OpenAIError:
    """The answer of any exception raised while serving a generation: a bug is a 500 whose
    message names only its type (and is logged)."""
    answer = as_openai(exc)
    if answer is None:
        log.error("generation failed", exc_info=exc)
        return OpenAIError(500, f"internal error ({type(exc).__name__})")
    return answer
