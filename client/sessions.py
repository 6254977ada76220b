"""Sessions over the Open Inference Protocol sequence extension: the parameters each call
of one sequence carries (``sequence_id``, ``sequence_start`` on the first, ``sequence_end``
on the last). Shared by the sync and async session objects; no I/O."""

from __future__ import annotations

import uuid
from typing import Any, Generic, TypeVar

from pteforge.client.errors import PteforgeError, SessionsUnavailableError
from pteforge.client.operations import Ref

SEQUENCE_EXTENSION = "sequence"
C = TypeVar("C")


def check_sessions(extensions: frozenset[str], url: str) -> None:
    """Raise SessionsUnavailableError unless the server announces sequences."""
    if SEQUENCE_EXTENSION not in extensions:
        raise SessionsUnavailableError(
            f"the server at {url} does not announce the {SEQUENCE_EXTENSION!r} extension "
            f"(GET /v2 lists {', '.join(sorted(extensions)) or 'none'}): it has no sessions"
        )


class SequenceState:
    """Where one sequence stands: not started, open, or ended."""

    def __init__(self, sequence_id: str | int | None = None) -> None:
        self.id: str | int = sequence_id if sequence_id is not None else uuid.uuid4().hex
        self.started = False
        self.ended = False

    def parameters(self, end: bool) -> dict[str, Any]:
        """The request parameters of the next call."""
        if self.ended:
            raise PteforgeError(f"sequence {self.id!r} has ended")
        params: dict[str, Any] = {"sequence_id": self.id}
        if not self.started:
            params["sequence_start"] = True
        if end:
            params["sequence_end"] = True
        return params

    def answered(self, params: dict[str, Any]) -> None:
        """A call with ``params`` succeeded."""
        self.started = True
        self.ended = bool(params.get("sequence_end"))


class SequenceSession(Generic[C]):
    """Calls of one sequence over client ``C``; what the sync and async sessions share."""

    def __init__(self, client: C, artifact: Ref, state: SequenceState) -> None:
        self._client = client
        self._artifact = artifact
        self.state = state

    @property
    def id(self) -> str | int:
        return self.state.id
