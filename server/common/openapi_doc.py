"""The OpenAPI description of what a route reads or answers itself, which FastAPI cannot infer
from its signature: a body read from the stream (multipart uploads through
``receive_multipart``, JSON read by a ``BareRoute`` endpoint) and an answer that is not JSON
(a download, server-sent events)."""

from __future__ import annotations

from typing import Any


def request_body(media_type: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` of a route whose required body is ``schema`` as ``media_type``."""
    return {"requestBody": {"required": True, "content": {media_type: {"schema": schema}}}}


def multipart_body(schema: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` of a route whose required body is multipart form data of ``schema``."""
    return request_body("multipart/form-data", schema)


def json_body(description: str) -> dict[str, Any]:
    """``openapi_extra`` of a route whose required body is a JSON object ``description``
    describes."""
    return request_body("application/json", {"type": "object", "description": description})


def answers(media_type: str) -> dict[int | str, dict[str, Any]]:
    """``responses`` of a route whose 200 answer is ``media_type`` rather than JSON."""
    return {200: {"content": {media_type: {}}}}
