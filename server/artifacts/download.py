"""Streaming a stored `.pte` with ``ETag`` (its sha256), ``Range`` and ``If-None-Match``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from pteforge.server.http.ranges import etag_matches, parse_range, quoted_etag
from pteforge.storage.blobs import BlobStore
from pteforge.storage.domain import Artifact

PTE_MEDIA_TYPE = "application/octet-stream"


def pte_response(request: Request, blobs: BlobStore, artifact: Artifact) -> Response:
    """200 / 206 / 304 for the artifact's bytes; chunks are verified as they stream."""
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
        body = blobs.read_range(artifact.sha256, wanted.start, wanted.length)
        return StreamingResponse(body, 206, headers=headers, media_type=PTE_MEDIA_TYPE)
    headers["Content-Length"] = str(artifact.size_bytes)
    return StreamingResponse(
        blobs.open(artifact.sha256), 200, headers=headers, media_type=PTE_MEDIA_TYPE
    )
