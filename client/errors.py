"""The client's exceptions: one root, and one table from the service's error codes to
classes; and its one warning, ``NumericsWarning``.

``/v1`` errors carry ``{"error": {"code", "message"}}``: the code picks the class. ``/v2``
errors carry ``{"error": "..."}`` only: the status picks it. A failed compile job raises the
class of its ``error.code`` too, with the job attached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pteforge.client.models import Job


class PteforgeError(Exception):
    """Root of everything ``pteforge.client`` raises."""


class NumericsWarning(UserWarning):
    """A compile kept its artifact although a method's numerics check failed (status
    ``over_tolerance``): the message names the method, the measured error and the limit."""


class TransportError(PteforgeError):
    """The server could not be reached, or the connection broke, after any retries."""


class ChecksumMismatchError(PteforgeError):
    """A download's sha256 is not the artifact's; the partial file was removed."""


class SessionsUnavailableError(PteforgeError):
    """The server does not announce the Open Inference Protocol ``sequence`` extension."""


class APIError(PteforgeError):
    """The service answered with an error: ``status``, its ``code`` and ``message``; and
    ``retry_after``, the seconds its ``Retry-After`` asked for (429, 503), else None."""

    default_code = "error"
    retry_after: float | None = None

    def __init__(
        self, message: str, *, status: int = 0, code: str | None = None, job: Job | None = None
    ) -> None:
        self.status = status
        self.code = code or self.default_code
        self.message = message
        self.job = job
        super().__init__(
            f"{status} {self.code}: {message}" if status else f"{self.code}: {message}"
        )


class BadRequestError(APIError):
    default_code = "bad_request"


class UnauthorizedError(APIError):
    """401: the token is missing, unknown to this server's database, or revoked."""

    default_code = "unauthorized"


class NotFoundError(APIError):
    """404: no such resource in the token's project (another project's ids look the same)."""

    default_code = "not_found"


class ConflictError(APIError):
    default_code = "conflict"


class PayloadTooLargeError(APIError):
    default_code = "payload_too_large"


class RangeNotSatisfiableError(APIError):
    default_code = "range_not_satisfiable"


class InvalidRequestError(APIError):
    """422: the request is well formed but names something wrong."""

    default_code = "invalid_request"


class InvalidPlanError(InvalidRequestError):
    default_code = "invalid_plan"


class UnknownBackendError(InvalidRequestError):
    default_code = "unknown_backend"


class InvalidOptionsError(InvalidRequestError):
    default_code = "invalid_options"


class InvalidProgramError(InvalidRequestError):
    default_code = "invalid_program"


class UploadRejectedError(InvalidRequestError):
    """An uploaded archive or ``.pte`` was refused; ``code`` says why (``unsafe_zip``, ...)."""

    default_code = "upload_rejected"


class CompileError(APIError):
    """A compile failed (``compile_failed``, ``compile_crashed``)."""

    default_code = "compile_failed"


class LoweringFailedError(CompileError):
    default_code = "lowering_failed"


class JobCanceledError(APIError):
    """The compile job was canceled before it produced an artifact."""

    default_code = "canceled"


class InvalidInputError(BadRequestError):
    """``/v2``: the tensors do not fit the method (name, dtype, shape)."""

    default_code = "invalid_input"


class InferenceError(APIError):
    """``/v2``: the artifact could not be loaded or failed on these inputs."""

    default_code = "inference_failed"


class TooManyRequestsError(APIError):
    """429: the caller's project is over one of its limits for now (memory of its requests
    in flight, sessions, crashed workers); ``retry_after`` says when to try again."""

    default_code = "too_many_requests"


class ServerError(APIError):
    """5xx: a fault of the service, not of the request."""

    default_code = "internal_error"


class ServiceUnavailableError(ServerError):
    """503: try again later (the client already retried idempotent calls)."""

    default_code = "service_unavailable"


class InsufficientStorageError(ServerError):
    """507: nothing was stored, because the server's disk is full or the project is past
    its storage quota (the message says which); delete what the project no longer needs."""

    default_code = "insufficient_storage"


_UPLOAD_CODES = (
    "invalid_upload",
    "not_a_zip",
    "corrupt_zip",
    "zip_bomb",
    "unsafe_zip",
    "unsafe_entry_name",
    "duplicate_entry",
    "pickle_payload",
    "unsafe_guard_code",
    "unsafe_expression",
    "unsafe_operator",
    "unsafe_sample_inputs",
    "invalid_json",
    "invalid_pte",
    "worker_out_of_memory",
    "upload_rejected",
)

# The service's error codes -> classes: the one mapping of this module.
ERROR_CODES: dict[str, type[APIError]] = {
    "bad_request": BadRequestError,
    "unauthorized": UnauthorizedError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "payload_too_large": PayloadTooLargeError,
    "request_entity_too_large": PayloadTooLargeError,
    "range_not_satisfiable": RangeNotSatisfiableError,
    "invalid_request": InvalidRequestError,
    "invalid_plan": InvalidPlanError,
    "unknown_backend": UnknownBackendError,
    "invalid_options": InvalidOptionsError,
    "invalid_program": InvalidProgramError,
    "lowering_failed": LoweringFailedError,
    "compile_failed": CompileError,
    "compile_crashed": CompileError,
    "canceled": JobCanceledError,
    "internal_error": ServerError,
    "integrity_error": ServerError,
    "service_unavailable": ServiceUnavailableError,
    "insufficient_storage": InsufficientStorageError,
    "too_many_requests": TooManyRequestsError,
    **dict.fromkeys(_UPLOAD_CODES, UploadRejectedError),
}

# An unknown code: the status decides (``/v1``). No code at all: ``/v2``, whose 400 means
# bad tensors and whose 422 means the artifact failed to load or run.
_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    416: RangeNotSatisfiableError,
    422: InvalidRequestError,
    429: TooManyRequestsError,
    503: ServiceUnavailableError,
    507: InsufficientStorageError,
}
_V2_BY_STATUS: dict[int, type[APIError]] = {
    **_BY_STATUS,
    400: InvalidInputError,
    422: InferenceError,
}


def error_class(status: int, code: str | None) -> type[APIError]:
    """The class for an error ``code``; for an unknown code or none, the HTTP ``status``'s."""
    if code is not None and code in ERROR_CODES:
        return ERROR_CODES[code]
    if code is not None and code.startswith("unsafe_"):
        return UploadRejectedError
    by_status = _BY_STATUS if code is not None else _V2_BY_STATUS
    if status in by_status:
        return by_status[status]
    if status >= 500:
        return ServerError
    return BadRequestError if 400 <= status < 500 else APIError


def error_from_body(status: int, body: Any, fallback: str) -> APIError:
    """The exception for an error answer whose JSON body is ``body`` (any shape)."""
    code: str | None = None
    message = fallback
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code")) if error.get("code") else None
        message = str(error.get("message") or fallback)
    elif isinstance(error, str):
        message = error
    return error_class(status, code)(message, status=status, code=code)


def raise_for_job(job: Job) -> None:
    """Raise the error a job ended with (the class of its ``error.code``), if any."""
    if job.status == "succeeded" and job.artifact_id:
        return
    if job.status == "canceled":
        raise JobCanceledError(f"{job} was canceled", code="canceled", job=job)
    code = job.error.code if job.error else "compile_failed"
    message = job.error.message if job.error else f"{job} ended without an artifact"
    raise error_class(422, code)(message, code=code, job=job)
