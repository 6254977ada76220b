"""The work behind the /v2 routes, on the event loop: resolving a model for a caller and
running an infer request (slow decoding and encoding go to the threadpool).

``run_decoded`` runs a request any frontend has decoded and counts it in the model's
statistics; ``infer`` is the HTTP frontend's decoding and encoding around it."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool

from pteforge.contracts.artifact_report import unrunnable_reason
from pteforge.runtime import InferResult
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.oip_codec import (
    InferRequest,
    encode_infer_response,
    split_model_name,
)
from pteforge.runtime.validation import JSON_BYTES_PER_ELEMENT, json_request_budget
from pteforge.server.auth.dependencies import Principal
from pteforge.server.http.memory import HeldBytes
from pteforge.server.inference.bodies import decompressed, inline
from pteforge.server.inference.dependencies import InferenceState
from pteforge.server.inference.resolver import ResolvedArtifact, version_number
from pteforge.server.inference.sequences import sequence_of, session_scope
from pteforge.server.inference.statistics import (
    PhaseTimes,
    StatsKey,
    counted_version,
    phase_times,
)
from pteforge.server.inference.statuses import (
    NotFoundError,
    NotRunnableError,
    RequestTooLargeError,
)

T = TypeVar("T")

Encoded = tuple[bytes, int | None, dict[str, float]]
"""An encoded infer response: its body, its JSON header length (binary tensors) and the
runtime's phase timings."""


def _resolve_and_remember(
    state: InferenceState, principal: Principal, ref: str, version: str | None
) -> ResolvedArtifact | None:
    artifact = state.resolver.resolve(principal, ref, version)
    if artifact is not None:
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
        # a name is echoed cut: the path may hold 64 KiB of one
        raise NotFoundError(f"model {model[:200]!r}: no artifact or model {ref[:200]!r}{pinned}")
    if method not in artifact.methods:
        known = ", ".join(artifact.methods)
        which = "artifact" if artifact.version is None else f"{ref!r} version {artifact.version}"
        raise NotFoundError(
            f"model {model[:200]!r}: {which} has no method {method[:200]!r} ({known})"
        )
    return artifact


async def model_of(
    state: InferenceState, principal: Principal, model: str, version: str | None = None
) -> tuple[ResolvedArtifact, MethodSignature]:
    """The artifact and the named signature of ``model`` (``{artifact_id}.{method}`` or
    ``{name}.{method}``, at ``version`` if given; 404 when the caller has none, 400 for a
    version that is not a number)."""
    version_number(version)
    ref, method = split_model_name(model)
    artifact = _check_model(model, version, await resolve(state, principal, ref, version))
    served = artifact.served.get(method)
    if served is None:  # naming and pinning cost ~20 us a request: once per resolve
        signature = await state.pool.method_metadata_async(
            artifact.sha256, method, artifact.source, session_scope(principal)
        )
        named = signature.named(artifact.names.get(method))
        served = artifact.served[method] = named.pinned_by(artifact.signatures.get(method))
    return artifact, served


async def check_ready(
    state: InferenceState, principal: Principal, model: str, version: str | None = None
) -> None:
    """Raise unless ``model`` can run here: as :func:`model_of` does, and
    ``NotRunnableError`` for a method delegated to a backend this host's runtime does not
    register (``ResolvedArtifact.unrunnable``): the one readiness rule of HTTP and gRPC."""
    artifact, signature = await model_of(state, principal, model, version)
    _check_runnable(model, artifact, signature)


def _check_runnable(model: str, artifact: ResolvedArtifact, signature: MethodSignature) -> None:
    missing = artifact.unrunnable.get(signature.name)
    if missing:
        raise NotRunnableError(
            f"model {model[:200]!r} is not ready: it is {unrunnable_reason(missing)} (a "
            "compile-only target: download the .pte for a device that has it)"
        )


async def infer(
    state: InferenceState,
    principal: Principal,
    model: str,
    body: bytes,
    encoding: str,
    json_length: int | None,
    version: str | None,
    held: HeldBytes,
) -> Encoded:
    """Run one HTTP infer request. Decoding a compressed or large-JSON body, and encoding
    its reply, runs in the threadpool so the event loop is not held up; the rest is async.
    A body that fails to decode counts as a failed request of the model; its decoded inputs
    count in ``held`` (the request's share of ``state.memory``) with its body."""
    artifact, signature = await model_of(state, principal, model, version)
    cheap = inline(encoding, body, json_length)
    started = time.perf_counter()
    decode = partial(_decode, state, body, encoding, json_length, signature)
    try:
        request = decode() if cheap else await run_in_threadpool(decode)
    except Exception:
        count_undecodable(state, principal, model, version, artifact, started)
        raise
    held.grow_by_run(request, signature)
    encode = partial(_encode, model, served_version(artifact), request, signature, cheap)
    return await run_decoded(
        state, principal, model, version, artifact, signature, request, encode, started=started
    )


async def run_decoded(
    state: InferenceState,
    principal: Principal,
    model: str,
    version: str | None,
    artifact: ResolvedArtifact,
    signature: MethodSignature,
    request: InferRequest,
    encode: Callable[[InferResult], Awaitable[T]],
    *,
    started: float | None = None,
) -> T:
    """Run an already decoded infer request and ``encode`` its result: the one way every
    frontend (HTTP, gRPC) runs a request, so each counts in the same statistics.

    ``model`` and ``version`` are as the caller addressed them, ``artifact`` and
    ``signature`` what ``model_of`` answered for them. ``started`` is the
    ``time.perf_counter()`` at which the frontend began decoding the request (default:
    now). The request counts in ``state.statistics`` and the Prometheus phase histograms
    of (project, model, version; a model name without a version: the version it resolved
    to): a success with its phases (see ``statistics``), or a failure if running or
    encoding raised (the error propagates).
    """
    key = _key(principal, model, version, artifact)
    sent = time.perf_counter()
    started = sent if started is None else started
    try:
        _check_runnable(model, artifact, signature)  # ready's rule, not the runtime's error
        result = await state.pool.infer_async(
            artifact.sha256, signature.name, request.inputs, artifact.source,
            profile=bool(request.parameters.get("profile", False)),
            sequence=sequence_of(principal, request.parameters),
            scope=session_scope(principal),
        )  # fmt: skip
        ran = time.perf_counter()
        encoded = await encode(result)
    except Exception:
        _count(state, key, time.perf_counter() - started, None)
        raise
    done = time.perf_counter()
    phases = phase_times(result.timings, sent - started, ran - sent, done - ran)
    _count(state, key, done - started, phases)
    return encoded


def count_undecodable(
    state: InferenceState,
    principal: Principal,
    model: str,
    version: str | None,
    artifact: ResolvedArtifact,
    started: float,
) -> None:
    """Count a request whose body or message failed to decode (from ``started``, a
    ``time.perf_counter()``) as a failed request of the model, as ``run_decoded`` would."""
    key = _key(principal, model, version, artifact)
    _count(state, key, time.perf_counter() - started, None)


def _key(
    principal: Principal, model: str, version: str | None, artifact: ResolvedArtifact
) -> StatsKey:
    return StatsKey(session_scope(principal), model, counted_version(version, artifact.version))


async def model_statistics(
    state: InferenceState, principal: Principal, model: str | None, version: str | None
) -> dict[str, Any]:
    """The statistics extension's answer: the caller's models, or ``model`` (at ``version``
    if given; 404 unless the caller has it), as every frontend answers it."""
    resolved = None
    if model is not None:
        artifact, _ = await model_of(state, principal, model, version)
        resolved = artifact.version
    return state.statistics.answer(session_scope(principal), model, version, resolved)


def _count(state: InferenceState, key: StatsKey, total_s: float, phases: PhaseTimes | None) -> None:
    state.statistics.count(key, total_s, phases)


def served_version(artifact: ResolvedArtifact) -> str:
    """The ``model_version`` a response names: the model version that answered (a model
    name's latest, or the one named), ``"1"`` for an artifact id, which has no versions."""
    return "1" if artifact.version is None else str(artifact.version)


async def _encode(
    model: str,
    version: str,
    request: InferRequest,
    signature: MethodSignature,
    cheap: bool,
    result: InferResult,
) -> Encoded:
    encode = partial(_encoded, model, version, request, signature, result)
    return encode() if cheap else await run_in_threadpool(encode)


def _decode(
    state: InferenceState,
    body: bytes,
    encoding: str,
    json_length: int | None,
    signature: MethodSignature,
) -> InferRequest:
    plain = decompressed(encoding, body, state.max_request_bytes)
    _check_json_size(len(plain) if json_length is None else min(json_length, len(plain)), signature)
    return state.headers.decode(plain, json_length, signature)


def _check_json_size(nbytes: int, signature: MethodSignature) -> None:
    """413 for a JSON header larger than the method's inputs can need, before it is parsed
    (:func:`~pteforge.runtime.validation.json_request_budget`)."""
    budget = json_request_budget(signature)
    if budget is not None and nbytes > budget:
        raise RequestTooLargeError(
            f"the request JSON has {nbytes} bytes; method {signature.name!r} needs at most "
            f"{budget} ({JSON_BYTES_PER_ELEMENT} per element of its inputs): send large "
            "tensors as binary data"
        )


def response_parameters(result: InferResult) -> dict[str, Any]:
    """The parameters an infer response carries, on every protocol: the runtime's phase
    timings (ms), ``cache_hit``, and the ``profile`` (JSON) when one was asked for."""
    parameters: dict[str, Any] = {k: round(v, 4) for k, v in result.timings.items()}
    parameters["cache_hit"] = result.cache_hit
    if result.profile is not None:
        parameters["profile"] = json.dumps(result.profile)
    return parameters


def _encoded(
    model: str, version: str, request: InferRequest, signature: MethodSignature, result: InferResult
) -> Encoded:
    parameters = response_parameters(result)
    body_out, json_length = encode_infer_response(
        model, request, signature, result.outputs, parameters, version
    )
    return body_out, json_length, result.timings
