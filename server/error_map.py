"""How the errors of the layers below the server are answered (used by :mod:`errors`)."""

from __future__ import annotations

from pteforge.backends.errors import InvalidOptionsError, UnknownBackendError
from pteforge.contracts.errors import ErrorCode
from pteforge.manager import errors as manager
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
        Translation(storage.BlobIntegrityError, 500, ErrorCode.INTEGRITY_ERROR),
        Translation(storage.InvalidRangeError, 416, ErrorCode.RANGE_NOT_SATISFIABLE),
        Translation(storage.NotFoundError, 404, ErrorCode.NOT_FOUND),
        Translation(storage.ConflictError, 409, ErrorCode.CONFLICT),
        Translation(storage.IllegalTransitionError, 409, ErrorCode.CONFLICT),
        Translation(manager.PlanError, 422, ErrorCode.INVALID_PLAN),
        Translation(manager.UnknownMethodError, 422, ErrorCode.INVALID_PLAN),
        Translation(manager.UnknownBackendIdError, 422, ErrorCode.UNKNOWN_BACKEND),
        Translation(UnknownBackendError, 422, ErrorCode.UNKNOWN_BACKEND),
        Translation(InvalidOptionsError, 422, ErrorCode.INVALID_OPTIONS),
        Translation(manager.LoweringError, 422, ErrorCode.LOWERING_FAILED),
        Translation(manager.ProgramInputError, 422, ErrorCode.INVALID_PROGRAM),
        Translation(manager.ManagerError, 422, ErrorCode.COMPILE_FAILED),
    ]
