"""The one error table: how the service answers an exception, read from the exception itself.

Each exception class of the server and of the layers below it (storage, manager, backends,
the sandbox) declares its :class:`ErrorCode` once, as a ``code`` class attribute that its
subclasses inherit; :func:`contracts.errors.code_of` reads it, for a failed job
(``server/jobs/lowering_child.py``) and for an HTTP answer (here, with the code's status from
``errors.HTTP_STATUS``), so jobs and HTTP cannot disagree. A new exception touches only the
module that defines it. An upload the sandbox refuses answers with its own ``reason`` and
``http_status`` (which defence fired); ``/v2``'s runtime errors have their own statuses
(``server/inference/statuses.py``) and no code.
"""

from __future__ import annotations

from pteforge.backends.errors import BackendCatalogError
from pteforge.contracts.errors import ErrorCode, code_of
from pteforge.manager.errors import ManagerError
from pteforge.server.errors import HTTP_STATUS, Answer, ServiceError
from pteforge.server.sandbox import UploadRejectedError
from pteforge.storage.errors import StorageError

OUT_OF_SPACE = "the server is out of disk space: nothing was stored; retry once space is freed"

ROOTS: tuple[type[Exception], ...] = (
    ServiceError,
    StorageError,
    ManagerError,
    BackendCatalogError,
    UploadRejectedError,
)
"""The exception root of each layer the service answers; anything else is a bug."""


def answer(exc: BaseException) -> Answer | None:
    """How ``exc`` is answered over HTTP, or None when it is a bug (500 ``internal_error``)."""
    code = code_of(exc)
    if code is ErrorCode.INSUFFICIENT_STORAGE and not isinstance(exc, ROOTS):  # an OSError
        return Answer(HTTP_STATUS[code], code, f"{OUT_OF_SPACE} ({exc})")
    if not isinstance(exc, ROOTS) or code is ErrorCode.INTERNAL_ERROR:
        return None
    if isinstance(exc, UploadRejectedError):
        return Answer(exc.http_status, exc.reason, exc.message)
    message = exc.message if isinstance(exc, ServiceError) else str(exc)
    return Answer(HTTP_STATUS[code], code, message or type(exc).__name__)
