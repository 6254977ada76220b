"""How the errors of the layers below the server are answered (used by :mod:`errors`)."""

from __future__ import annotations

from pteforge.backends.errors import InvalidOptionsError, UnknownBackendError
from pteforge.manager.errors import (
    LoweringError,
    ManagerError,
    PlanError,
    ProgramInputError,
    UnknownBackendIdError,
    UnknownMethodError,
)
from pteforge.server.errors import Translation
from pteforge.server.sandbox import UploadRejectedError
from pteforge.storage import errors as storage


def _reason(exc: BaseException) -> str:
    assert isinstance(exc, UploadRejectedError)
    return exc.reason


def _upload_status(exc: BaseException) -> int:
    assert isinstance(exc, UploadRejectedError)
    return int(exc.http_status)


def _upload_message(exc: BaseException) -> str:
    assert isinstance(exc, UploadRejectedError)
    return exc.message


def layer_translations() -> list[Translation]:
    """Most specific first: the first matching entry answers."""
    return [
        Translation(UploadRejectedError, _upload_status, _reason, _upload_message),
        Translation(storage.BlobIntegrityError, 500, "integrity_error"),
        Translation(storage.InvalidRangeError, 416, "range_not_satisfiable"),
        Translation(storage.NotFoundError, 404, "not_found"),
        Translation(storage.ConflictError, 409, "conflict"),
        Translation(storage.IllegalTransitionError, 409, "conflict"),
        Translation(PlanError, 422, "invalid_plan"),
        Translation(UnknownMethodError, 422, "invalid_plan"),
        Translation(UnknownBackendIdError, 422, "unknown_backend"),
        Translation(UnknownBackendError, 422, "unknown_backend"),
        Translation(InvalidOptionsError, 422, "invalid_options"),
        Translation(LoweringError, 422, "lowering_failed"),
        Translation(ProgramInputError, 422, "invalid_program"),
        Translation(ManagerError, 422, "compile_failed"),
    ]
