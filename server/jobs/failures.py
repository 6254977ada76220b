"""Stable failure codes for jobs, from the exceptions a lowering can raise."""

from __future__ import annotations

from pteforge.contracts.errors import ErrorCode


def failure_code(exc: BaseException) -> ErrorCode:
    """The ``error.code`` a failed job carries for ``exc`` (checked most specific first)."""
    from pteforge.manager.errors import (
        LoweringError,
        ManagerError,
        PlanError,
        ProgramInputError,
        UnknownBackendIdError,
    )

    table: list[tuple[type[BaseException], ErrorCode]] = [
        (PlanError, ErrorCode.INVALID_PLAN),
        (UnknownBackendIdError, ErrorCode.UNKNOWN_BACKEND),
        (LoweringError, ErrorCode.LOWERING_FAILED),
        (ProgramInputError, ErrorCode.INVALID_PROGRAM),
        (ManagerError, ErrorCode.COMPILE_FAILED),
    ]
    try:
        from pteforge.server.sandbox import UploadRejectedError
    except ImportError:  # pragma: no cover - sandbox not built yet
        pass
    else:
        table.append((UploadRejectedError, ErrorCode.UPLOAD_REJECTED))
    for exc_type, code in table:
        if isinstance(exc, exc_type):
            return code
    return ErrorCode.INTERNAL_ERROR
