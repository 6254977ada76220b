"""What requests hold in the server's memory while they are in flight, per project and in all.

Requests wait (for a runtime worker, for the rest of a slow upload) holding their bodies, so
without a bound one project's many large requests took the server's memory: 24 ``/v2``
requests of 128 MiB held 6.5 GB, 4 requests of 4 bytes whose answers take 1 GiB 6 GB, 60
``/v1`` JSON bodies of 16 MiB left unfinished 1 GB. :class:`RequestMemory` is the one
ledger: ``/v2`` and gRPC infer requests count their bodies, decoded inputs and the most their
outputs can take until answered, ``/v1`` JSON requests their bodies. It also counts the
requests with a body each project has in flight (uploads among them), whatever they hold:
each holds a connection. Each refusal declares its status: 429 past the project's share or
number, 503 past the server's total (both with ``Retry-After``), 413 for a request that
needs more than a share alone.
"""

from __future__ import annotations

from pteforge.runtime.errors import RuntimeLayerError
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.oip_codec import InferRequest
from pteforge.runtime.validation import most_output_bytes

MEMORY_SETTING = "PTEFORGE_REQUEST_MEMORY_BYTES"
DEFAULT_REQUEST_MEMORY = 4 << 30
"""What requests in flight may hold where no setting says (apps built by tests, benches)."""
REQUESTS_SETTING = "PTEFORGE_REQUESTS_PER_PROJECT"
DEFAULT_REQUESTS_PER_PROJECT = 256
"""How many requests with a body one project may have in flight. Each holds a connection
(a file descriptor) whatever its bytes: 1,000 uploads of one project, each trickling a byte
now and then, took every descriptor of a server limited to 1,024, and it answered no one."""


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


class ProjectRequestsError(MemoryRefusal):
    """The project already has its whole number of requests in flight."""

    status = 429


class OverShareError(MemoryRefusal):
    """One request needs more than a project's whole share: it can never be taken."""

    status = 413
    retry_after_s = None


class RequestMemory:
    """The bytes requests in flight hold, per project and in all (see the module docstring).
    Used on the event loop only (HTTP and gRPC share it): no lock."""

    def __init__(
        self,
        total: int,
        per_project: int | None = None,
        requests_per_project: int = DEFAULT_REQUESTS_PER_PROJECT,
    ) -> None:
        self.total = total
        self.per_project = min(per_project or total // 2, total)
        self.requests_per_project = requests_per_project
        self.held = 0
        self._projects: dict[str, int] = {}
        self._requests: dict[str, int] = {}

    def holding(self, project: str) -> HeldBytes:
        """What one request of ``project`` holds: a context manager whose bytes, and the
        request's place among its project's requests in flight, are given back when its
        block ends, however it ends (or by ``release``). Refused (429) when the project
        already has ``requests_per_project`` in flight."""
        count = self._requests.get(project, 0)
        if count >= self.requests_per_project:
            raise ProjectRequestsError(
                f"this project has {count} requests in flight, as many as it may "
                f"({REQUESTS_SETTING}): retry when some have ended"
            )
        self._requests[project] = count + 1
        return HeldBytes(self, project)

    def requests_of(self, project: str) -> int:
        """How many requests of ``project`` are in flight."""
        return self._requests.get(project, 0)

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
        _lower(self._projects, project, nbytes)
        self.held -= nbytes

    def leave(self, project: str) -> None:
        """A request of ``project`` is no longer in flight."""
        _lower(self._requests, project, 1)


def _lower(counts: dict[str, int], project: str, by: int) -> None:
    left = counts[project] - by
    if left:
        counts[project] = left
    else:
        del counts[project]


class HeldBytes:
    """The bytes one request holds in its :class:`RequestMemory`."""

    def __init__(self, memory: RequestMemory, project: str) -> None:
        self.memory = memory
        self.project = project
        self.nbytes = 0
        self.in_flight = True  # counted by ``RequestMemory.holding``

    def __enter__(self) -> HeldBytes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def grow(self, nbytes: int) -> None:
        """Count ``nbytes`` more, or raise the refusal that names the limit."""
        if nbytes > 0:
            self.memory.take(self.project, nbytes, self.nbytes)
            self.nbytes += nbytes

    def grow_by_run(self, request: InferRequest, signature: MethodSignature) -> None:
        """Count a decoded request's inputs and the most its method's outputs can take
        (those it wants as JSON as their text), before it runs. Binary inputs are views of
        the body, counted again: that is near what such a request holds (one of 128 MiB
        held about twice that, measured)."""
        as_json = {wanted.name for wanted in request.outputs if not wanted.binary}
        inputs = sum(array.nbytes for array in request.inputs)
        self.grow(inputs + most_output_bytes(signature, as_json))

    def within(self) -> HeldBytes:
        """The bytes of one message of the stream that holds this place (a gRPC
        ``ModelStreamInfer``): counted in the same project and given back on their own,
        while the place stays the stream's."""
        part = HeldBytes(self.memory, self.project)
        part.in_flight = False
        return part

    def release(self) -> None:
        """Give back what this request holds (once its answer is sent, or it failed)."""
        if self.nbytes:
            self.memory.release(self.project, self.nbytes)
            self.nbytes = 0
        if self.in_flight:
            self.in_flight = False
            self.memory.leave(self.project)
