"""What the /v2 routes reach through ``request.app.state``: the runtime pool, the artifact
resolver, the auth function, the caches and the metrics of the running app.

The app's lifespan builds one ``InferenceState`` per startup (``new_inference_state``) and
sets it as ``app.state.inference``; the routes, created with the app, read it per request,
so a second startup of the same app serves its own new pool.
"""

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, HTTPException, Request
from prometheus_client import CollectorRegistry

from pteforge.runtime import RuntimePool
from pteforge.runtime.oip_headers import HeaderPlans
from pteforge.server.auth.cache import TtlCache
from pteforge.server.auth.dependencies import HasHeaders, Principal
from pteforge.server.http.memory import DEFAULT_REQUEST_MEMORY, RequestMemory
from pteforge.server.inference.bodies import DEFAULT_MAX_REQUEST_BYTES
from pteforge.server.inference.metrics import LATENCY_BUCKETS, InferenceMetrics
from pteforge.server.inference.resolver import ArtifactResolver, ResolvedArtifact
from pteforge.server.inference.statistics import ModelStatistics

if TYPE_CHECKING:  # the generation routes import this module
    from pteforge.server.generation.target import TargetCache

DEFAULT_RESOLVE_TTL_S = 1.0

Authenticate = Callable[[HasHeaders], Awaitable[Principal]]
"""An async function of the request (or gRPC call) returning the caller, or raising (e.g. an
error the app's handlers turn into 401): ``pteforge.server.auth.dependencies.cached_principal``."""


@dataclass(frozen=True)
class StreamLimits:
    """How far a generation stream's client may fall behind (``server/generation``)."""

    send_timeout_s: float = 60.0
    """Longest one send to the client may wait (``PTEFORGE_STREAM_SEND_TIMEOUT_SECONDS``)."""
    buffer_bytes: int = 4 * 1024 * 1024
    """Generated text that may wait for the client (``PTEFORGE_STREAM_BUFFER_BYTES``)."""


@dataclass(frozen=True)
class InferenceState:
    """The /v2 side of one running app: set as ``app.state.inference`` by its lifespan."""

    pool: RuntimePool
    resolver: ArtifactResolver
    authenticate: Authenticate
    registry: CollectorRegistry
    """What ``/metrics`` serves (the /v2 and pool metrics are added to it)."""
    metrics: InferenceMetrics
    statistics: ModelStatistics
    """Per (project, model, version) infer statistics (``/v2/models/{model}/stats``)."""
    artifacts: TtlCache[tuple[Principal, str, str | None], ResolvedArtifact]
    """Resolved artifacts by (principal, artifact id or model name, version: None for a
    name's latest); misses are not cached. Cleared when this server changes a model."""
    targets: "TargetCache"
    """Resolved generation targets by (project id, model name, version or None: the latest),
    forgotten when this server changes that model (``forget_target``)."""
    max_request_bytes: int
    server_version: str
    metrics_token: str | None = None
    """The bearer token ``/metrics`` answers (``PTEFORGE_METRICS_TOKEN``); None: open."""
    streams: StreamLimits = StreamLimits()
    """The bounds of a generation stream whose client reads slowly."""
    headers: HeaderPlans = field(default_factory=HeaderPlans)
    """Binary ``/v2`` request headers already checked, per method signature."""
    memory: RequestMemory = field(kw_only=True)
    """What requests in flight hold, per project and in all (the app's, shared with /v1)."""


def new_inference_state(
    resolver: ArtifactResolver,
    pool: RuntimePool,
    authenticate: Authenticate,
    registry: CollectorRegistry,
    *,
    server_version: str = "0",
    resolve_ttl_s: float = DEFAULT_RESOLVE_TTL_S,
    clock: Callable[[], float] = time.monotonic,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    metrics_token: str | None = None,
    streams: StreamLimits | None = None,
    memory: RequestMemory | None = None,
) -> InferenceState:
    """The state of the /v2 routes over ``pool`` (which the caller owns and closes).

    Metrics go to ``registry``. A resolved artifact is remembered per (principal, artifact
    id, model name's latest version or pinned version) for ``resolve_ttl_s`` seconds (0
    turns that off), so a deleted artifact may still run for that long; ``clock`` times
    that. A model changed through this server is forgotten at once (the app's
    ``model_changed``), so its new version serves at once; through another replica on the
    same database within ``resolve_ttl_s``. A version's
    generation target (its program and tokenizer) is remembered the same way, so a tokenizer
    replaced on it also takes effect within ``resolve_ttl_s``. An infer body
    over ``max_request_bytes``, as sent or once decompressed, gets a 413. ``/metrics``
    answers only ``metrics_token`` as a bearer token when one is given. ``streams`` bounds
    generation streams whose clients read slowly (``StreamLimits``' defaults if None);
    ``memory`` what infer requests in flight may hold (4 GiB, half per project, if None).
    """
    statistics = ModelStatistics(LATENCY_BUCKETS)
    return InferenceState(
        pool=pool,
        resolver=resolver,
        authenticate=authenticate,
        registry=registry,
        metrics=InferenceMetrics(registry, pool, statistics),
        statistics=statistics,
        artifacts=TtlCache(resolve_ttl_s, clock=clock),
        targets=TtlCache(resolve_ttl_s, clock=clock),
        max_request_bytes=max_request_bytes,
        server_version=server_version,
        metrics_token=metrics_token,
        streams=streams or StreamLimits(),
        memory=memory or RequestMemory(DEFAULT_REQUEST_MEMORY),
    )


def running_state(request: Request) -> InferenceState | None:
    """The /v2 state of the app serving ``request``; ``None`` outside its lifespan."""
    state: InferenceState | None = getattr(request.app.state, "inference", None)
    return state


def inference_state(request: Request) -> InferenceState:
    """Dependency: the /v2 state of the running app (503 when its runtime is not started)."""
    state = running_state(request)
    if state is None:
        raise HTTPException(503, "the inference runtime is not running")
    return state


async def authenticated(request: Request) -> Principal:
    """Dependency: the caller, authenticated by the running app's auth function."""
    return await inference_state(request).authenticate(request)


def pinned_version(request: Request) -> str | None:
    """Dependency: the ``{version}`` of a ``/v2/models/{model}/versions/{version}/...`` path,
    None on the route of a model's latest version; one handler serves both routes."""
    version: str | None = request.path_params.get("version")
    return version


State = Annotated[InferenceState, Depends(inference_state)]
Caller = Annotated[Principal, Depends(authenticated)]
PinnedVersion = Annotated[str | None, Depends(pinned_version)]
