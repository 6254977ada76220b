"""Streaming a stored `.pte` (or `.bpte`) with ``ETag`` (its sha256), ``Range`` and
``If-None-Match``; ``HEAD`` answers the same status and headers without the body."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from pteforge.server.common.openapi_doc import answers
from pteforge.server.http.ranges import etag_matches, parse_range, quoted_etag
from pteforge.storage.blobs import BlobStore
from pteforge.storage.domain import Artifact, BlobRef

PTE_MEDIA_TYPE = "application/octet-stream"
RANGE_ANSWERS: dict[int | str, dict[str, Any]] = {206: {}, 304: {}, 416: {}}
"""The OpenAPI ``responses`` of a download route's ``HEAD``: the statuses besides 200 that
:func:`content_response` answers."""
DOWNLOAD_ANSWERS = answers(PTE_MEDIA_TYPE) | RANGE_ANSWERS
"""The OpenAPI ``responses`` of a download route: the bytes, a range of them, or none."""


def pte_response(request: Request, blobs: BlobStore, artifact: Artifact) -> Response:
    """200 / 206 / 304 for the artifact's bytes (see :func:`content_response`)."""
    ref = BlobRef(artifact.sha256, artifact.size_bytes)
    return content_response(request, blobs, ref, f"{artifact.id}.pte")


def content_response(request: Request, blobs: BlobStore, ref: BlobRef, filename: str) -> Response:
    """200 / 206 / 304 for stored content; chunks are verified as they stream. A ``HEAD``
    request gets the status and headers ``GET`` would, and no content is read."""
    headers = {
        "ETag": quoted_etag(ref.sha256),
        "Accept-Ranges": "bytes",
        "Content-Disposition": f'attachment; filename="{filename}"',
    }
    if etag_matches(request.headers.get("if-none-match"), ref.sha256):
        return Response(status_code=304, headers=headers)
    wanted = parse_range(request.headers.get("range"), ref.size)
    if_range = request.headers.get("if-range")
    if wanted is not None and (if_range is None or if_range == headers["ETag"]):
        headers["Content-Range"] = wanted.content_range()
        headers["Content-Length"] = str(wanted.length)
        return _answer(
            request,
            206,
            headers,
            lambda: blobs.read_range(ref.sha256, wanted.start, wanted.length),
        )
    headers["Content-Length"] = str(ref.size)
    return _answer(request, 200, headers, lambda: blobs.open(ref.sha256))


def _answer(
    request: Request, status: int, headers: dict[str, str], body: Callable[[], Iterator[bytes]]
) -> Response:
    """The streamed body, or for ``HEAD`` the same headers (``Content-Length`` included)."""
    if request.method == "HEAD":
        return Response(status_code=status, headers=headers, media_type=PTE_MEDIA_TYPE)
    return StreamingResponse(body(), status, headers=headers, media_type=PTE_MEDIA_TYPE)
