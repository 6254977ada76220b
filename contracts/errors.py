"""The stable ``/v1`` error codes: ``{"error": {"code", "message"}}`` answers and failed jobs.

Each code is stated once, here; the server's error table, the job failure table and the
compile worker name codes through :class:`ErrorCode`. Being a ``StrEnum``, a code compares
equal to, and serializes as, its plain string. (An upload refused by the sandbox answers with
the sandbox's own reason, such as ``unsafe_operator``; an HTTP error without a code of its
own answers with its status phrase, such as ``method_not_allowed``.)
"""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """A machine-readable error code of the ``/v1`` API and of failed jobs."""

    # requests
    BAD_REQUEST = "bad_request"
    INVALID_REQUEST = "invalid_request"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    RANGE_NOT_SATISFIABLE = "range_not_satisfiable"
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
    # bugs
    INTEGRITY_ERROR = "integrity_error"
    INTERNAL_ERROR = "internal_error"
