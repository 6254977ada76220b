"""The storage layer's exceptions; every database error leaves this layer as one of these."""

from __future__ import annotations

from typing import ClassVar

from pteforge.contracts.errors import ErrorCode


class StorageError(Exception):
    """Root of every error raised by :mod:`pteforge.storage`; one of no kind below is a bug."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL_ERROR


class StorageFullError(StorageError):
    """The database, or the disk it lives on, is full: the transaction was rolled back."""

    code = ErrorCode.INSUFFICIENT_STORAGE


class NotFoundError(StorageError):
    """A row the caller named does not exist (or belongs to another project)."""

    code = ErrorCode.NOT_FOUND


class ConflictError(StorageError):
    """A write clashed with existing rows, e.g. a duplicate unique name."""

    code = ErrorCode.CONFLICT


class QueueFullError(StorageError):
    """A project already has as many unfinished (queued or running) jobs as it may."""

    code = ErrorCode.TOO_MANY_REQUESTS


class BlobNotFoundError(NotFoundError):
    """No stored content has the requested sha256."""


class BlobIntegrityError(StorageError):
    """Stored content does not hash to what it claims; its bytes must not be served."""

    code = ErrorCode.INTEGRITY_ERROR

    def __init__(self, sha256: str, detail: str) -> None:
        super().__init__(f"blob {sha256} failed verification: {detail}")
        self.sha256 = sha256
        self.detail = detail


class InvalidRangeError(StorageError):
    """A ranged read asked for bytes outside the blob."""

    code = ErrorCode.RANGE_NOT_SATISFIABLE


class IllegalTransitionError(StorageError):
    """A job state change that the job state machine does not allow."""

    code = ErrorCode.CONFLICT


class LeaseLostError(IllegalTransitionError):
    """A worker acted on a job it no longer holds (lease expired or reassigned)."""
