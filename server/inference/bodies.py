"""Reading an infer request body: its size limit, ``Content-Encoding`` and JSON header length."""

from __future__ import annotations

import zlib

from starlette.requests import Request

from pteforge.runtime.oip_codec import HEADER_LENGTH, ProtocolError
from pteforge.server.inference.statuses import RequestTooLargeError

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
    if not (raw.isascii() and raw.isdigit()):  # int() also takes '+16', '1_6' and ' 16'
        raise ProtocolError(f"{HEADER_LENGTH} must be a count of bytes, got {raw!r}")
    return int(raw)


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
