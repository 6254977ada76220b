"""Reading an infer request body: its size limit, ``Content-Encoding``, JSON header length,
and the memory that requests in flight hold at once (:class:`RequestMemory`)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import numpy as np
from starlette.requests import Request

from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.oip_codec import HEADER_LENGTH, ProtocolError
from pteforge.runtime.validation import most_output_bytes
from pteforge.server.http.bodies import capped_chunks, check_content_length, read_capped
from pteforge.server.inference.statuses import (
    ProjectMemoryError,
    RequestTooLargeError,
    ServerMemoryError,
)

# Requests whose JSON part is larger than this are decoded in the threadpool, so a big JSON
# tensor cannot stall the event loop; smaller ones (and binary tensors) stay on the loop.
INLINE_JSON_BYTES = 64 << 10
# Largest infer request body, as sent and once decompressed; it is held in memory whole.
DEFAULT_MAX_REQUEST_BYTES = 256 << 20

_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def header_length(request: Request) -> int | None:
    """The ``Inference-Header-Content-Length`` of a binary request, ``None`` for plain JSON."""
    raw = request.headers.get(HEADER_LENGTH)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ProtocolError(f"{HEADER_LENGTH} must be an integer, got {raw!r}") from None


def content_encoding(request: Request) -> str:
    """The request's ``Content-Encoding``, lower case (``identity`` when absent)."""
    return request.headers.get("content-encoding", "identity").lower()


def decompressed(encoding: str, body: bytes, limit: int) -> bytes:
    """The body without its ``Content-Encoding`` (tritonclient can gzip or deflate requests),
    inflated to at most ``limit`` bytes: a small compressed body must not expand to gigabytes."""
    if encoding == "identity":
        return body
    if encoding not in _WBITS:
        raise ProtocolError(f"unsupported Content-Encoding {encoding!r} (gzip, deflate)")
    inflater = zlib.decompressobj(_WBITS[encoding])
    try:
        inflated = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ProtocolError(f"cannot decompress the {encoding} request body: {exc}") from None
    if len(inflated) > limit:
        raise RequestTooLargeError(f"the {encoding} request body inflates to over {limit} bytes")
    if not inflater.eof or inflater.unused_data:
        raise ProtocolError(f"the {encoding} request body is truncated or has trailing data")
    return inflated


def inline(encoding: str, body: bytes, json_length: int | None) -> bool:
    """Whether decoding this request is cheap enough to do on the event loop."""
    json_bytes = len(body) if json_length is None else json_length
    return encoding == "identity" and json_bytes <= INLINE_JSON_BYTES


MEMORY_SETTING = "PTEFORGE_INFER_MEMORY_BYTES"


class RequestMemory:
    """The bytes that infer requests in flight hold in the server (their bodies, decoded
    inputs and the most their outputs can take, until the answer is sent), per project and
    in all. Requests wait for a runtime worker holding their bodies, so without a bound one
    project's many large requests took the server's memory (24 requests of 128 MiB held
    6.5 GB; 4 requests of 4 bytes whose answers take 1 GiB, 6 GB). A request that would
    take its project past ``per_project`` is refused (``ProjectMemoryError``, 429), one that
    would take the server past ``total`` too (``ServerMemoryError``, 503), one that needs
    more than a project's share alone gets a 413. Used on the event loop only (HTTP and
    gRPC share it): no lock."""

    def __init__(self, total: int, per_project: int | None = None) -> None:
        self.total = total
        self.per_project = min(per_project or total // 2, total)
        self.held = 0
        self._projects: dict[str, int] = {}

    def holding(self, project: str) -> HeldBytes:
        """What one request of ``project`` holds: a context manager whose bytes are given
        back when its block ends, however it ends."""
        return HeldBytes(self, project)

    def take(self, project: str, nbytes: int, mine: int) -> None:
        """Count ``nbytes`` more for a request of ``project`` holding ``mine``, or refuse."""
        if mine + nbytes > self.per_project:
            raise RequestTooLargeError(
                f"this request needs {mine + nbytes} bytes (its body and decoded "
                f"inputs), more than one project's share of {self.per_project} "
                f"({MEMORY_SETTING}_PER_PROJECT)"
            )
        project_held = self._projects.get(project, 0)
        if project_held + nbytes > self.per_project:
            raise ProjectMemoryError(
                f"this project's infer requests in flight hold {project_held} bytes; with "
                f"{nbytes} more that is over its share of {self.per_project} "
                f"({MEMORY_SETTING}_PER_PROJECT): retry when some have ended"
            )
        if self.held + nbytes > self.total:
            raise ServerMemoryError(
                f"infer requests in flight hold {self.held} bytes; with {nbytes} more that is "
                f"over the server's {self.total} ({MEMORY_SETTING}): retry shortly"
            )
        self._projects[project] = project_held + nbytes
        self.held += nbytes

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

    async def read(self, request: Request, limit: int) -> bytes:
        """The body, at most ``limit`` bytes (413), counted as it arrives: a declared
        ``Content-Length`` at once, so a request over its share is refused unread."""
        check_content_length(request, limit, RequestTooLargeError)
        declared = request.headers.get("content-length", "")
        if declared.isdigit():
            self.grow(int(declared))
            return await read_capped(request, limit, RequestTooLargeError)
        chunks = []
        async for chunk in capped_chunks(request, limit, RequestTooLargeError):
            self.grow(len(chunk))
            chunks.append(chunk)
        return b"".join(chunks)
