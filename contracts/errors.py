"""The stable ``/v1`` error codes: ``{"error": {"code", "message"}}`` answers and failed jobs.

Each code is stated once, here. Each exception class of every layer declares its code once,
as a ``code`` class attribute (inherited by its subclasses), and :func:`code_of` reads it for
both users: a failed job carries it, and the server's one table (``server/error_map.py``)
answers it with the code's HTTP status. Being a ``StrEnum``, a code compares equal to, and
serializes as, its plain string. (An upload refused by the sandbox answers over HTTP with the
sandbox's own reason, such as ``unsafe_operator``; an HTTP error without a code of its own
answers with its status phrase, such as ``method_not_allowed``.)
"""

from __future__ import annotations

import enum
import errno


class ErrorCode(enum.StrEnum):
    """A machine-readable error code of the ``/v1`` API and of failed jobs."""

    # requests
    BAD_REQUEST = "bad_request"
    INVALID_REQUEST = "invalid_request"
    INVALID_UPLOAD = "invalid_upload"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    RANGE_NOT_SATISFIABLE = "range_not_satisfiable"
    TOO_MANY_REQUESTS = "too_many_requests"
    # plans and programs
    INVALID_PLAN = "invalid_plan"
    UNKNOWN_BACKEND = "unknown_backend"
    INVALID_OPTIONS = "invalid_options"
    INVALID_PROGRAM = "invalid_program"
    UPLOAD_REJECTED = "upload_rejected"
    # compile jobs
    LOWERING_FAILED = "lowering_failed"
    COMPILE_FAILED = "compile_failed"
    COMPILE_CRASHED = "compile_crashed"
    OUT_OF_MEMORY = "out_of_memory"
    TIMEOUT = "timeout"
    # the host
    INSUFFICIENT_STORAGE = "insufficient_storage"
    # bugs
    INTEGRITY_ERROR = "integrity_error"
    INTERNAL_ERROR = "internal_error"


def code_of(exc: BaseException) -> ErrorCode:
    """The code ``exc``'s class declares (its ``code`` attribute); ``INSUFFICIENT_STORAGE``
    for a disk that is full, whichever layer's write found it (the error or its cause is
    ``ENOSPC`` or ``EDQUOT``); else ``INTERNAL_ERROR``: one nobody foresaw, a bug."""
    code = getattr(type(exc), "code", None)
    if isinstance(code, ErrorCode):
        return code
    return ErrorCode.INSUFFICIENT_STORAGE if out_of_space(exc) else ErrorCode.INTERNAL_ERROR


def out_of_space(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an error it was raised from, is a write to a full disk."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
