"""Stable failure codes for jobs, from the exceptions a lowering can raise."""

from __future__ import annotations


def failure_code(exc: BaseException) -> str:
    """The ``error.code`` a failed job carries for ``exc`` (checked most specific first)."""
    from pteforge.manager.errors import (
        LoweringError,
        ManagerError,
        PlanError,
        ProgramInputError,
        UnknownBackendIdError,
    )

    table: list[tuple[type[BaseException], str]] = [
        (PlanError, "invalid_plan"),
        (UnknownBackendIdError, "unknown_backend"),
        (LoweringError, "lowering_failed"),
        (ProgramInputError, "invalid_program"),
        (ManagerError, "compile_failed"),
    ]
    try:
        from pteforge.server.sandbox import UploadRejectedError
    except ImportError:  # pragma: no cover - sandbox not built yet
        pass
    else:
        table.append((UploadRejectedError, "upload_rejected"))
    for exc_type, code in table:
        if isinstance(exc, exc_type):
            return code
    return "internal_error"
