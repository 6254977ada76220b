"""The OpenAPI description of a ``multipart/form-data`` request body: the upload routes read
the stream themselves (``receive_multipart``), so FastAPI cannot infer it from a signature."""

from __future__ import annotations

from typing import Any


def multipart_body(schema: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` of a route whose required body is multipart form data of ``schema``."""
    return {
        "requestBody": {
            "required": True,
            "content": {"multipart/form-data": {"schema": schema}},
        }
    }
