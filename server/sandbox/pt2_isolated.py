"""Load an uploaded pt2 archive only in a disposable, resource-limited worker process."""

from __future__ import annotations

from pathlib import Path

from .isolation import Isolation, SubprocessIsolation, read_result
from .limits import ArchiveLimits, ProcessLimits
from .pt2_validator import validate_pt2_archive
from .specs import ProgramDescription

_WORKER = "pteforge.server.sandbox.pt2_worker"


def load_programs_isolated(
    path: str | Path,
    limits: ProcessLimits | None = None,
    archive_limits: ArchiveLimits | None = None,
    isolation: Isolation | None = None,
) -> ProgramDescription:
    """Validate ``path`` here, then really load it in a child; only its description comes back.

    A rejection, crash, memory or time overrun of the child raises ``UploadRejectedError``
    (``IsolatedLoadError`` for the worker-side failures) and never affects this process.
    ``isolation`` picks how the child starts (default: a fresh interpreter).
    """
    validate_pt2_archive(path, archive_limits)
    isolation = isolation or SubprocessIsolation()
    reply = isolation.run(_WORKER, [str(Path(path).resolve())], limits or ProcessLimits())
    return read_result(ProgramDescription, reply)
