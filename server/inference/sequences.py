"""The Open Inference Protocol sequence extension on /v2: request parameters to a sequence.

``tritonclient`` sends ``sequence_id`` (a non-zero integer or a non-empty string),
``sequence_start`` and ``sequence_end`` as request ``parameters``; an id of ``0`` or ``""``
(or none) means a stateless request. Ids are scoped to the caller's project.
"""

from __future__ import annotations

from typing import Any

from pteforge.runtime.errors import ProtocolError
from pteforge.runtime.sessions import Sequence
from pteforge.runtime.validation import flag

MAX_SEQUENCE_ID_CHARS = 256
SEQUENCE_EXTENSION = "sequence"  # announced in the server metadata, as Triton does


def session_scope(principal: Any) -> str:
    """The scope of the caller's sequence ids: its project (the principal itself in tests,
    where it is a project name)."""
    return str(getattr(principal, "project_id", principal))


def sequence_of(principal: Any, parameters: dict[str, Any]) -> Sequence | None:
    """The sequence an infer request belongs to, or None for a stateless request."""
    raw = parameters.get("sequence_id")
    start, end = flag(parameters, "sequence_start"), flag(parameters, "sequence_end")
    if raw is None or raw == 0 or raw == "":
        if start or end:
            raise ProtocolError("sequence_start and sequence_end need a sequence_id")
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise ProtocolError(f"sequence_id must be an integer or a string, got {raw!r}")
    if isinstance(raw, str) and len(raw) > MAX_SEQUENCE_ID_CHARS:
        raise ProtocolError(f"sequence_id is longer than {MAX_SEQUENCE_ID_CHARS} characters")
    return Sequence(session_scope(principal), raw, start, end)
