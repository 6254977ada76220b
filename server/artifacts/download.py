"""Streaming a stored `.pte` with ``ETag`` (its sha256), ``Range`` and ``If-None-Match``;
``HEAD`` answers the same status and headers without the body."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from pteforge.server.http.ranges import etag_matches, parse_range, quoted_etag
from pteforge.storage.blobs import BlobStore
from pteforge.storage.domain import Artifact

PTE_MEDIA_TYPE = "application/octet-stream"


def pte_response(request: Request, blobs: BlobStore, artifact: Artifact) -> Response:
    """200 / 206 / 304 for the artifact's bytes; chunks are verified as they stream. A
    ``HEAD`` request gets the status and headers ``GET`` would, and no content is read."""
    headers = {
        "ETag": quoted_etag(artifact.sha256),
        "Accept-Ranges": "bytes",
        "Content-Disposition": f'attachment; filename="{artifact.id}.pte"',
    }
    if etag_matches(request.headers.get("if-none-match"), artifact.sha256):
        return Response(status_code=304, headers=headers)
    wanted = parse_range(request.headers.get("range"), artifact.size_bytes)
    if_range = request.headers.get("if-range")
    if wanted is not None and (if_range is None or if_range == headers["ETag"]):
        headers["Content-Range"] = wanted.content_range()
        headers["Content-Length"] = str(wanted.length)
        return _answer(
            request,
            206,
            headers,
            lambda: blobs.read_range(artifact.sha256, wanted.start, wanted.length),
        )
    headers["Content-Length"] = str(artifact.size_bytes)
    return _answer(request, 200, headers, lambda: blobs.open(artifact.sha256))


def _answer(
    request: Request, status: int, headers: dict[str, str], body: Callable[[], Iterator[bytes]]
) -> Response:
    """The streamed body, or for ``HEAD`` the same headers (``Content-Length`` included)."""
    if request.method == "HEAD":
        return Response(status_code=status, headers=headers, media_type=PTE_MEDIA_TYPE)
    return StreamingResponse(body(), status, headers=headers, media_type=PTE_MEDIA_TYPE)
