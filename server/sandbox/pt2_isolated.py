"""Load an uploaded pt2 archive only in a disposable, resource-limited worker process."""

from __future__ import annotations

from pathlib import Path

from .errors import IsolatedLoadError, UploadTooLargeError
from .isolation import Isolation, SubprocessIsolation, read_result
from .limits import ArchiveLimits, ProcessLimits
from .pt2_validator import check_pt2_container
from .specs import ProgramDescription

_WORKER = "pteforge.server.sandbox.pt2_worker"
_TOO_LARGE = frozenset({"archive_too_large", "zip_bomb"})  # UploadTooLargeError's reasons


def load_programs_isolated(
    path: str | Path,
    limits: ProcessLimits | None = None,
    archive_limits: ArchiveLimits | None = None,
    isolation: Isolation | None = None,
) -> ProgramDescription:
    """Check ``path``'s zip container here, then validate it in full and really load it in a
    child (:func:`~.pt2_validator.check_pt2_container` says why the documents are parsed only
    there); only its description comes back.

    A rejection, crash, memory or time overrun of the child raises ``UploadRejectedError``
    (``IsolatedLoadError`` for the child's refusals, ``UploadTooLargeError`` for its size
    refusals) and never affects this process. ``isolation`` picks how the child starts
    (default: a fresh interpreter).
    """
    check_pt2_container(path, archive_limits)
    isolation = isolation or SubprocessIsolation()
    try:
        reply = isolation.run(_WORKER, [str(Path(path).resolve())], limits or ProcessLimits())
    except IsolatedLoadError as exc:
        if exc.reason in _TOO_LARGE:
            raise UploadTooLargeError(exc.reason, exc.message) from None
        raise
    return read_result(ProgramDescription, reply)
