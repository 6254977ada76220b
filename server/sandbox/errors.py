"""Rejections of untrusted uploads.

Every check in this package raises a subclass of :class:`UploadRejectedError`.  The server maps
``http_status`` to the response and puts ``reason`` in the error code, so a client learns which
defence fired and on which archive entry; a failed job carries the class's ``code``.
"""

from __future__ import annotations

from typing import ClassVar

from pteforge.contracts.errors import ErrorCode


class UploadRejectedError(Exception):
    """An uploaded file was refused; ``reason`` is a stable machine-readable code."""

    code: ClassVar[ErrorCode] = ErrorCode.UPLOAD_REJECTED
    http_status = 400

    def __init__(self, reason: str, message: str, entry: str | None = None) -> None:
        self.reason = reason
        self.entry = entry
        self.message = f"{entry}: {message}" if entry else message
        super().__init__(f"[{reason}] {self.message}")

    def in_part(self, part: str) -> UploadRejectedError:
        """This refusal, its message prefixed with the upload part it concerns."""
        self.message = f"part {part!r}: {self.message}"
        self.args = (f"[{self.reason}] {self.message}",)
        return self


class UploadTooLargeError(UploadRejectedError):
    """The upload, or what it declares it will expand to, exceeds a size limit."""

    http_status = 413


class UnsafeArchiveError(UploadRejectedError):
    """A pt2 archive uses a feature that could run code or is outside the allowlist."""

    http_status = 422


class IsolatedLoadError(UploadRejectedError):
    """The disposable worker that loads an upload failed, crashed, ran out of memory or time."""

    http_status = 422


class InvalidPteError(UploadRejectedError):
    """An uploaded ``.pte`` does not verify or load in the ExecuTorch runtime."""

    http_status = 422
