"""The work behind the /v2 routes, on the event loop: resolving a model for a caller and
running an infer request (slow decoding and encoding go to the threadpool)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from starlette.concurrency import run_in_threadpool

from pteforge.runtime import InferResult
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.oip_codec import (
    InferRequest,
    decode_infer_request,
    encode_infer_response,
    split_model_name,
)
from pteforge.server.auth.dependencies import Principal
from pteforge.server.inference.bodies import decompressed, inline
from pteforge.server.inference.dependencies import InferenceState
from pteforge.server.inference.resolver import ResolvedArtifact
from pteforge.server.inference.sequences import sequence_of
from pteforge.server.inference.statuses import NotFoundError

Encoded = tuple[bytes, int | None, dict[str, float]]
"""An encoded infer response: its body, its JSON header length (binary tensors) and the
runtime's phase timings."""


def _resolve_and_remember(
    state: InferenceState, principal: Principal, ref: str, version: str | None
) -> ResolvedArtifact | None:
    artifact = state.resolver.resolve(principal, ref, version)
    if artifact is not None and artifact.cacheable:
        state.artifacts.put((principal, ref, version), artifact)
    return artifact


async def resolve(
    state: InferenceState, principal: Principal, ref: str, version: str | None = None
) -> ResolvedArtifact | None:
    """The artifact ``ref`` (an artifact id or a model name, at ``version`` if given) names:
    ``state.resolver.resolve`` in the threadpool, remembered in ``state.artifacts`` where
    it may be. The one place /v2 resolves a model, once per request."""
    cached = state.artifacts.get((principal, ref, version))
    if cached is not None:
        return cached
    return await run_in_threadpool(_resolve_and_remember, state, principal, ref, version)


def _check_model(
    model: str, version: str | None, artifact: ResolvedArtifact | None
) -> ResolvedArtifact:
    ref, method = split_model_name(model)
    if artifact is None:
        pinned = "" if version is None else f" version {version!r}"
        raise NotFoundError(f"model {model!r}: no artifact or model {ref!r}{pinned}")
    if method not in artifact.methods:
        known = ", ".join(artifact.methods)
        raise NotFoundError(f"model {model!r}: artifact has no method {method!r} ({known})")
    return artifact


async def model_of(
    state: InferenceState, principal: Principal, model: str, version: str | None = None
) -> tuple[ResolvedArtifact, MethodSignature]:
    """The artifact and the named signature of ``model`` (``{artifact_id}.{method}`` or
    ``{name}.{method}``, at ``version`` if given; 404 when the caller has none)."""
    ref, method = split_model_name(model)
    artifact = _check_model(model, version, await resolve(state, principal, ref, version))
    signature = await state.pool.method_metadata_async(artifact.sha256, method, artifact.source)
    return artifact, signature.named(artifact.names.get(method))


async def infer(
    state: InferenceState,
    principal: Principal,
    model: str,
    body: bytes,
    encoding: str,
    json_length: int | None,
    version: str | None = None,
) -> Encoded:
    """Run one infer request. Decoding a compressed or large-JSON body, and encoding its
    reply, runs in the threadpool so the event loop is not held up; the rest is async."""
    artifact, signature = await model_of(state, principal, model, version)
    cheap = inline(encoding, body, json_length)
    decode = partial(_decode, body, encoding, json_length, signature, state.max_request_bytes)
    request = decode() if cheap else await run_in_threadpool(decode)
    result = await state.pool.infer_async(
        artifact.sha256, signature.name, request.inputs, artifact.source,
        profile=bool(request.parameters.get("profile", False)),
        sequence=sequence_of(principal, request.parameters),
    )  # fmt: skip
    encode = partial(_encoded, model, request, signature, result)
    return encode() if cheap else await run_in_threadpool(encode)


def _decode(
    body: bytes, encoding: str, json_length: int | None, signature: MethodSignature, limit: int
) -> InferRequest:
    return decode_infer_request(decompressed(encoding, body, limit), json_length, signature)


def _encoded(
    model: str, request: InferRequest, signature: MethodSignature, result: InferResult
) -> Encoded:
    parameters: dict[str, Any] = {k: round(v, 4) for k, v in result.timings.items()}
    parameters["cache_hit"] = result.cache_hit
    if result.profile is not None:
        parameters["profile"] = json.dumps(result.profile)
    body_out, json_length = encode_infer_response(
        model, request, signature, result.outputs, parameters
    )
    return body_out, json_length, result.timings
