"""What requests hold in the server's memory while they are in flight, per project and in all.

Requests wait (for a runtime worker, for the rest of a slow upload) holding their bodies, so
without a bound one project's many large requests took the server's memory: 24 ``/v2``
requests of 128 MiB held 6.5 GB, 4 requests of 4 bytes whose answers take 1 GiB 6 GB, 60
``/v1`` JSON bodies of 16 MiB left unfinished 1 GB. :class:`RequestMemory` is the one
ledger: ``/v2`` and gRPC infer requests count their bodies, decoded inputs and the most their
outputs can take until answered, ``/v1`` JSON requests their bodies. Each refusal declares
its status: 429 past the project's share, 503 past the server's total (both with
``Retry-After``), 413 for a request that needs more than a share alone.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pteforge.runtime.errors import RuntimeLayerError
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.validation import most_output_bytes

MEMORY_SETTING = "PTEFORGE_REQUEST_MEMORY_BYTES"
DEFAULT_REQUEST_MEMORY = 4 << 30
"""What requests in flight may hold where no setting says (apps built by tests, benches)."""


class MemoryRefusal(RuntimeLayerError):
    """A request the memory of requests in flight cannot take; answered with ``status`` (and
    ``Retry-After: retry_after_s`` when set) on every frontend."""

    status = 503
    retry_after_s: int | None = 1


class ProjectMemoryError(MemoryRefusal):
    """The project's requests in flight would hold more than its share."""

    status = 429


class ServerMemoryError(MemoryRefusal):
    """All requests in flight would hold more than the server allows them."""


class OverShareError(MemoryRefusal):
    """One request needs more than a project's whole share: it can never be taken."""

    status = 413
    retry_after_s = None


class RequestMemory:
    """The bytes requests in flight hold, per project and in all (see the module docstring).
    Used on the event loop only (HTTP and gRPC share it): no lock."""

    def __init__(self, total: int, per_project: int | None = None) -> None:
        self.total = total
        self.per_project = min(per_project or total // 2, total)
        self.held = 0
        self._projects: dict[str, int] = {}

    def holding(self, project: str) -> HeldBytes:
        """What one request of ``project`` holds: a context manager whose bytes are given
        back when its block ends, however it ends (or by ``release``)."""
        return HeldBytes(self, project)

    def take(self, project: str, nbytes: int, mine: int) -> None:
        """Count ``nbytes`` more for a request of ``project`` holding ``mine``, or refuse."""
        if mine + nbytes > self.per_project:
            raise OverShareError(
                f"this request needs {mine + nbytes} bytes in memory, more than one "
                f"project's share of {self.per_project} ({MEMORY_SETTING}_PER_PROJECT)"
            )
        project_held = self._projects.get(project, 0)
        if project_held + nbytes > self.per_project:
            raise ProjectMemoryError(
                f"this project's requests in flight hold {project_held} bytes; with "
                f"{nbytes} more that is over its share of {self.per_project} "
                f"({MEMORY_SETTING}_PER_PROJECT): retry when some have ended"
            )
        if self.held + nbytes > self.total:
            raise ServerMemoryError(
                f"requests in flight hold {self.held} bytes; with {nbytes} more that is "
                f"over the server's {self.total} ({MEMORY_SETTING}): retry shortly"
            )
        self._projects[project] = project_held + nbytes
        self.held += nbytes

    def check_room(self, project: str) -> None:
        """Refuse now when ``project`` already holds its whole share: for a request whose
        size is not known before it is read (a gRPC message), so a project that keeps
        sending is refused unread once its share is full."""
        held = self._projects.get(project, 0)
        if held >= self.per_project:
            raise ProjectMemoryError(
                f"this project's requests in flight hold {held} bytes, its whole share of "
                f"{self.per_project} ({MEMORY_SETTING}_PER_PROJECT): retry when some have ended"
            )

    def release(self, project: str, nbytes: int) -> None:
        """Give back ``nbytes`` that a request of ``project`` held."""
        left = self._projects[project] - nbytes
        if left:
            self._projects[project] = left
        else:
            del self._projects[project]
        self.held -= nbytes


class HeldBytes:
    """The bytes one request holds in its :class:`RequestMemory`."""

    def __init__(self, memory: RequestMemory, project: str) -> None:
        self.memory = memory
        self.project = project
        self.nbytes = 0

    def __enter__(self) -> HeldBytes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def grow(self, nbytes: int) -> None:
        """Count ``nbytes`` more, or raise the refusal that names the limit."""
        if nbytes > 0:
            self.memory.take(self.project, nbytes, self.nbytes)
            self.nbytes += nbytes

    def grow_by_run(self, inputs: Iterable[np.ndarray], signature: MethodSignature) -> None:
        """Count a decoded request's inputs and the most its method's outputs can take,
        before it runs. Binary inputs are views of the body, counted again: that is near
        what such a request holds (one of 128 MiB held about twice that, measured)."""
        self.grow(sum(array.nbytes for array in inputs) + most_output_bytes(signature))

    def release(self) -> None:
        """Give back what this request holds (once its answer is sent, or it failed)."""
        if self.nbytes:
            self.memory.release(self.project, self.nbytes)
            self.nbytes = 0
