"""The /v2 Open Inference Protocol routes and /metrics, as a router the server mounts.

Thin HTTP glue: decoding/encoding lives in ``pteforge.runtime.protocol``, execution in
``pteforge.runtime.RuntimePool``, artifact lookup behind ``ArtifactResolver``.
"""

# No ``from __future__ import annotations``: FastAPI must see the ``Principal`` alias built
# inside ``build_inference_router`` as a real object, not a string it cannot resolve.
import json
import time
import zlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.concurrency import run_in_threadpool

from pteforge.runtime import InferResult, RuntimeLayerError, RuntimePool
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.protocol import (
    BINARY_EXTENSION,
    HEADER_LENGTH,
    InferRequest,
    ProtocolError,
    decode_infer_request,
    encode_infer_response,
    model_metadata,
    split_model_name,
)
from pteforge.server.auth.cache import TtlCache
from pteforge.server.inference.metrics import InferenceMetrics
from pteforge.server.inference.resolver import ArtifactResolver, ResolvedArtifact
from pteforge.server.inference.sequences import SEQUENCE_EXTENSION, sequence_of
from pteforge.server.inference.statuses import status_of

DEFAULT_RESOLVE_TTL_S = 1.0
# Requests whose JSON part is larger than this are decoded in the threadpool, so a big JSON
# tensor cannot stall the event loop; smaller ones (and binary tensors) stay on the loop.
INLINE_JSON_BYTES = 64 << 10
# Largest infer request body, as sent and once decompressed; it is held in memory whole.
DEFAULT_MAX_REQUEST_BYTES = 256 << 20


class NotFoundError(RuntimeLayerError):
    """The model (artifact or method) does not exist for this caller."""


class RequestTooLargeError(RuntimeLayerError):
    """An infer request body, as sent or once decompressed, is over the size limit (413)."""


def _status(exc: RuntimeLayerError) -> tuple[int, dict[str, str]]:
    """HTTP status (and extra headers, e.g. ``Retry-After``) of a runtime-layer error on /v2."""
    if isinstance(exc, RequestTooLargeError):
        return 413, {}
    if isinstance(exc, NotFoundError):
        return 404, {}
    return status_of(exc)


def error_response(status: int, message: str) -> JSONResponse:
    """The /v2 error body: ``{"error": "..."}``."""
    return JSONResponse({"error": message}, status_code=status)


class _Inference:
    """The work behind the routes, on the event loop (slow decoding goes to the threadpool)."""

    def __init__(
        self,
        resolver: ArtifactResolver,
        pool: RuntimePool,
        artifacts: TtlCache[tuple[Any, str], ResolvedArtifact],
        max_request_bytes: int,
    ) -> None:
        self.resolver = resolver
        self.pool = pool
        self.artifacts = artifacts
        self.max_request_bytes = max_request_bytes

    def resolve(self, principal: Any, artifact_id: str) -> ResolvedArtifact | None:
        """``resolver.resolve``, remembered for ``resolve_ttl_s`` (misses are not cached)."""
        artifact = self.resolver.resolve(principal, artifact_id)
        if artifact is not None and _hashable(principal):
            self.artifacts.put((principal, artifact_id), artifact)
        return artifact

    async def resolve_async(self, principal: Any, artifact_id: str) -> ResolvedArtifact | None:
        if _hashable(principal):
            cached = self.artifacts.get((principal, artifact_id))
            if cached is not None:
                return cached
        return await run_in_threadpool(self.resolve, principal, artifact_id)

    async def model(self, principal: Any, model: str) -> tuple[ResolvedArtifact, MethodSignature]:
        artifact_id, method = split_model_name(model)
        artifact = _check_model(model, await self.resolve_async(principal, artifact_id))
        signature = await self.pool.method_metadata_async(artifact.sha256, method, artifact.source)
        return artifact, signature.named(artifact.names.get(method))

    async def infer(
        self,
        principal: Any,
        model: str,
        body: bytes,
        encoding: str,
        header_length: int | None,
    ) -> tuple[bytes, int | None, dict[str, float]]:
        """Run one infer request. Decoding a compressed or large-JSON body, and encoding its
        reply, runs in the threadpool so the event loop is not held up; the rest is async."""
        artifact, signature = await self.model(principal, model)
        inline = _inline(encoding, body, header_length)
        decode = partial(self._decode, body, encoding, header_length, signature)
        request = decode() if inline else await run_in_threadpool(decode)
        result = await self.pool.infer_async(
            artifact.sha256, signature.name, request.inputs, artifact.source,
            profile=_wants_profile(request),
            sequence=sequence_of(principal, request.parameters),
        )  # fmt: skip
        encode = partial(_encoded, model, request, signature, result)
        return encode() if inline else await run_in_threadpool(encode)

    def _decode(
        self, body: bytes, encoding: str, header_length: int | None, signature: MethodSignature
    ) -> InferRequest:
        inflated = _decompressed(encoding, body, self.max_request_bytes)
        return decode_infer_request(inflated, header_length, signature)


def _hashable(principal: Any) -> bool:
    try:
        hash(principal)
    except TypeError:
        return False
    return True


def _check_model(model: str, artifact: ResolvedArtifact | None) -> ResolvedArtifact:
    artifact_id, method = split_model_name(model)
    if artifact is None:
        raise NotFoundError(f"model {model!r}: no artifact {artifact_id!r}")
    if method not in artifact.methods:
        known = ", ".join(artifact.methods)
        raise NotFoundError(f"model {model!r}: artifact has no method {method!r} ({known})")
    return artifact


def _wants_profile(request: InferRequest) -> bool:
    return bool(request.parameters.get("profile", False))


def _encoded(
    model: str, request: InferRequest, signature: MethodSignature, result: InferResult
) -> tuple[bytes, int | None, dict[str, float]]:
    parameters: dict[str, Any] = {k: round(v, 4) for k, v in result.timings.items()}
    parameters["cache_hit"] = result.cache_hit
    if result.profile is not None:
        parameters["profile"] = json.dumps(result.profile)
    body_out, json_length = encode_infer_response(
        model, request, signature, result.outputs, parameters
    )
    return body_out, json_length, result.timings


def _header_length(request: Request) -> int | None:
    raw = request.headers.get(HEADER_LENGTH)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ProtocolError(f"{HEADER_LENGTH} must be an integer, got {raw!r}") from None


_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _decompressed(encoding: str, body: bytes, limit: int) -> bytes:
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


async def _read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestTooLargeError(f"request body of {declared} bytes is over {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLargeError(f"request body is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _inline(encoding: str, body: bytes, header_length: int | None) -> bool:
    """Whether decoding this request is cheap enough to do on the event loop."""
    json_bytes = len(body) if header_length is None else header_length
    return encoding == "identity" and json_bytes <= INLINE_JSON_BYTES


def _infer_response(body: bytes, json_length: int | None) -> Response:
    if json_length is None:
        return Response(body, media_type="application/json")
    return Response(
        body, media_type="application/octet-stream", headers={HEADER_LENGTH: str(json_length)}
    )


_INFER_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/octet-stream": {
                "schema": {"type": "string", "format": "binary"},
                "description": "Binary tensor data extension: a JSON header of "
                "`Inference-Header-Content-Length` bytes, then the raw tensors.",
            },
        },
    }
}


def _document_infer(router: APIRouter) -> None:
    """Put the infer route in the OpenAPI docs. Requests never reach this endpoint: the plain
    route added before it at the same path and method matches first."""

    @router.post(
        "/v2/models/{model}/infer",
        summary="Run a method (JSON or binary tensors)",
        openapi_extra=_INFER_DOC,
        responses={200: {"content": {"application/octet-stream": {}}}},
    )
    async def infer_documented(model: str) -> Response:  # never called, see above
        raise AssertionError("the plain infer route answers this path")


def build_inference_router(
    resolver: ArtifactResolver,
    pool: RuntimePool,
    auth: Callable[[Request], Awaitable[Any]],
    registry: CollectorRegistry,
    *,
    server_version: str = "0",
    resolve_ttl_s: float = DEFAULT_RESOLVE_TTL_S,
    clock: Callable[[], float] = time.monotonic,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
) -> APIRouter:
    """The /v2 routes (health unauthenticated, the rest behind ``auth``) and ``/metrics``.

    ``auth`` is an async function of the request that returns the caller (passed to
    ``resolver.resolve`` as the principal) or raises (e.g. an ``HTTPException`` or an error
    the app's handlers turn into 401). Metrics go to ``registry``. A resolved artifact
    is remembered per (principal, artifact id) for ``resolve_ttl_s`` seconds (0 turns
    that off), so a deleted artifact may still run for that long; ``clock`` times that.
    An infer body over ``max_request_bytes``, as sent or once decompressed, gets a 413.
    """
    router = APIRouter(tags=["inference (Open Inference Protocol v2)"])
    work = _Inference(resolver, pool, TtlCache(resolve_ttl_s, clock=clock), max_request_bytes)
    metrics = InferenceMetrics(registry, pool)

    async def authenticated(request: Request) -> Any:
        return await auth(request)

    Principal = Annotated[Any, Depends(authenticated)]

    async def guarded(route: str, call: Callable[[], Any]) -> Response:
        try:
            response: Response = await call()
        except RuntimeLayerError as exc:
            status, headers = _status(exc)
            response = error_response(status, str(exc))
            response.headers.update(headers)
        metrics.observe_request(route, response.status_code)
        return response

    @router.get("/v2/health/live", summary="Liveness (no token needed)")
    async def live() -> dict[str, bool]:
        return {"live": True}

    @router.get("/v2/health/ready", summary="Readiness (no token needed)")
    async def ready() -> Any:
        if not pool.ready:
            return JSONResponse({"ready": False}, status_code=503)
        return {"ready": True}

    @router.get("/v2", summary="Server metadata")
    async def server_metadata(principal: Principal) -> dict[str, Any]:
        extensions = [BINARY_EXTENSION, SEQUENCE_EXTENSION]
        return {"name": "pteforge", "version": server_version, "extensions": extensions}

    async def _metadata(principal: Any, model: str) -> Response:
        async def call() -> Response:
            _, signature = await work.model(principal, model)
            return JSONResponse(model_metadata(model, signature))

        return await guarded("metadata", call)

    @router.get("/v2/models/{model}", summary="Model metadata of `{artifact_id}.{method}`")
    async def metadata(model: str, principal: Principal) -> Response:
        return await _metadata(principal, model)

    @router.get("/v2/models/{model}/versions/{version}", include_in_schema=False)
    async def metadata_versioned(model: str, version: str, principal: Principal) -> Response:
        return await _metadata(principal, model)

    async def _ready(principal: Any, model: str) -> Response:
        async def call() -> Response:
            await work.model(principal, model)
            return JSONResponse({"name": model, "ready": True})

        return await guarded("ready", call)

    @router.get("/v2/models/{model}/ready", summary="Model readiness")
    async def model_ready(model: str, principal: Principal) -> Response:
        return await _ready(principal, model)

    @router.get("/v2/models/{model}/versions/{version}/ready", include_in_schema=False)
    async def model_ready_versioned(model: str, version: str, principal: Principal) -> Response:
        return await _ready(principal, model)

    async def _infer(request: Request, principal: Any, model: str) -> Response:
        async def call() -> Response:
            start = time.perf_counter()
            header_length = _header_length(request)
            encoding = request.headers.get("content-encoding", "identity").lower()
            body = await _read_body(request, max_request_bytes)
            out, json_length, timings = await work.infer(
                principal, model, body, encoding, header_length
            )
            metrics.observe_timings(time.perf_counter() - start, timings)
            return _infer_response(out, json_length)

        return await guarded("infer", call)

    async def infer(request: Request) -> Response:
        """Run a method (JSON or binary tensors). A plain Starlette route: FastAPI's
        parameter and dependency solving cost about a third of the server's CPU here."""
        principal = await auth(request)
        return await _infer(request, principal, request.path_params["model"])

    router.add_route("/v2/models/{model}/infer", infer, methods=["POST"])
    router.add_route("/v2/models/{model}/versions/{version}/infer", infer, methods=["POST"])
    _document_infer(router)

    @router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router
