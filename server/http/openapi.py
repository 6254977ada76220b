"""The OpenAPI document as the service really answers: every error status each operation can
give, in the error shape it gives it.

FastAPI documents only the success answer and its own 422. The errors this service raises
come from shared places (the bearer dependency, the error table, the upload reader), so they
are added here from facts about each operation, once, instead of on every route.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from pteforge.contracts import METHOD_NAME_PATTERN

V1_ERROR = "Error"
V2_ERROR = "InferenceError"
OPENAI_ERROR = "OpenAIError"
OPENAI_PATHS = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/responses"})
"""The OpenAI-compatible routes, whose errors are OpenAI's shape (``server/generation``)."""
GENERATE_SUFFIXES = ("/generate", "/generate_stream")
"""The /v2 generate extension's routes, whose ``{model}`` is a model name."""
_SCHEMAS: dict[str, Any] = {
    V1_ERROR: {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    },
    V2_ERROR: {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string"}},
    },
    OPENAI_ERROR: {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type", "param", "code"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": {"type": ["string", "null"]},
                    "code": {"type": ["string", "null"]},
                },
            }
        },
    },
}
_REASONS = {
    400: "The request is malformed",
    401: "Missing, unknown or revoked bearer token",
    404: "No such resource in the caller's project",
    409: "The request clashes with the resource's current state (the message says why)",
    413: "The body is over the size limit",
    415: "The body is not of the content type this operation takes",
    416: "The range is outside the content",
    422: "The request is well-formed but its content is refused (the message says why)",
    429: "Too many requests at once for the caller's project: retry later",
    503: "Not ready, or temporarily out of capacity: retry later",
    507: "The server is out of disk space, or the project is past its storage quota "
    "(`PTEFORGE_PROJECT_STORAGE_BYTES`): nothing was stored",
}
MODEL_NAME_DOC = (
    "`{artifact_id}.{method}`: an artifact id, a dot and one of its method names "
    f"(`{METHOD_NAME_PATTERN}`); a name without a dot means the method `forward`. "
    "`{name}.{method}`, a model name from `/v1/models`, serves its latest version "
    "(`/v2/models/{name}.{method}/versions/{version}/...` a pinned one)."
)


def _error_statuses(path: str, method: str, operation: dict[str, Any]) -> set[int]:
    if path in OPENAI_PATHS or path.endswith(GENERATE_SUFFIXES):
        return {400, 401, 404, 413, 422, 429, 503}
    statuses = {401} if operation.get("security") else set()
    if "{" in path:
        statuses.add(404)
    body = operation.get("requestBody", {}).get("content", {})
    if body:
        statuses |= {400, 413, 422}
    if "application/json" in body and not path.startswith("/v2"):
        statuses.add(404)  # a JSON body names other resources by id (compile-jobs' program)
    if body and not path.startswith("/v2"):
        statuses.add(415)  # another Content-Type, or a Content-Encoding
    if "application/json" in body or path.endswith("/infer"):
        statuses |= {429, 503}  # the project's share, or the server's, of request memory
    if body:
        statuses.add(507)  # the disk (or the database) is full
    if path.startswith("/v2/models/"):
        # 400: a name that is neither '{artifact_id}.{method}' nor a model's ('.x', 'x.')
        statuses |= {400, 404, 422, 503} if path.endswith("/infer") else {400, 404}
    if path.startswith("/v2/repository/models/"):
        statuses |= {400, 404, 422}  # a malformed name, a missing model, one not runnable here
    if path == "/v1/jobs/{job_id}/events":
        statuses.add(429)  # the project has as many event streams open as it may
    if method == "get" and path.endswith(("/pte", "/bpte")):
        statuses.add(416)
    if method == "delete" and path == "/v1/artifacts/{artifact_id}":
        statuses.add(409)  # a model version serves the artifact
    if path in (
        "/v1/profile-jobs",
        "/v1/jobs/{job_id}/profile",
        "/v1/artifacts/{artifact_id}/bpte",
    ):
        statuses.add(409)  # no inputs to profile on, or the profile job has not succeeded
    return statuses


def _fastapi_422(responses: dict[str, Any]) -> set[int]:
    return {422} if "422" in responses else set()


def _document_errors(schema: dict[str, Any]) -> None:
    for path, operations in schema["paths"].items():
        error = V2_ERROR if path.startswith("/v2") else V1_ERROR
        error_ref = f"#/components/schemas/{OPENAI_ERROR if path in OPENAI_PATHS else error}"
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status in sorted(
                _error_statuses(path, method, operation) | _fastapi_422(responses)
            ):
                # FastAPI's own 422 says {"detail": [...]}; every error here is our error shape.
                responses[str(status)] = {
                    "description": _REASONS[status],
                    "content": {"application/json": {"schema": {"$ref": error_ref}}},
                }
            for parameter in operation.get("parameters", []):
                if parameter.get("name") == "model" and parameter.get("in") == "path":
                    parameter.setdefault("description", MODEL_NAME_DOC)


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` document the error answers (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(_SCHEMAS)
            _document_errors(schema)
            for unused in ("HTTPValidationError", "ValidationError"):  # replaced by Error
                schemas.pop(unused, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
