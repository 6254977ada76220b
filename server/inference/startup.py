"""What the app's lifespan starts for ``/v2``: the runtime pool from settings, and the
routes' state over the store (artifacts by project, cached bearer tokens)."""

from __future__ import annotations

import logging
from pathlib import Path

from prometheus_client import CollectorRegistry

from pteforge import __version__
from pteforge.backends import executable_backend_ids
from pteforge.contracts.artifact_report import method_backends
from pteforge.runtime import RuntimePool, TensorNames
from pteforge.runtime.crash_budget import CrashLimits
from pteforge.runtime.native import NativeBuildError, build_xnnpack_options
from pteforge.runtime.sessions import SessionLimits
from pteforge.runtime.supervisor import RestartPolicy
from pteforge.server.auth.cache import TtlCache
from pteforge.server.auth.dependencies import DEFAULT_TOKEN_TTL_S, Principal, cached_principal
from pteforge.server.common.program_source import program_source
from pteforge.server.common.services import Services
from pteforge.server.inference.dependencies import (
    DEFAULT_RESOLVE_TTL_S,
    InferenceState,
    StreamLimits,
    new_inference_state,
)
from pteforge.server.inference.resolver import (
    MAX_INDEXED_VERSIONS,
    IndexedVersion,
    ResolvedArtifact,
    version_number,
)
from pteforge.server.settings import Settings
from pteforge.storage.domain import Artifact, MethodSignature
from pteforge.storage.store import Store, Transaction

log = logging.getLogger(__name__)


class StoreArtifactResolver:
    """Project-scoped artifact lookup for ``/v2``, by artifact id or model name (an artifact
    id is looked up first); bytes come from the verified blob store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._executable: frozenset[str] | None = None

    def resolve(
        self, principal: Principal, model: str, version: str | None = None
    ) -> ResolvedArtifact | None:
        """The caller's artifact ``model``, else the artifact of model ``model``'s latest
        version (or ``version``), if the caller's project has one. Resolved once per
        request, so a new latest version never fails a request already resolved."""
        project_id = principal.project_id
        number = None
        with self.store.transaction(read_only=True) as tx:
            artifact = tx.artifacts.get(project_id, model)
            if artifact is None:
                found = _model_version(tx, project_id, model, version)
                if found is None:
                    return None
                number, artifact_id = found
                artifact = tx.artifacts.get(project_id, artifact_id)
        if artifact is None:
            return None
        return self._resolved(artifact, number)

    def index(self, principal: Principal) -> list[IndexedVersion]:
        """Every version of the caller's model names, oldest first within a name."""
        project_id = principal.project_id
        found: list[tuple[str, int, Artifact]] = []
        artifacts: dict[str, Artifact | None] = {}  # a version's artifact, read once
        with self.store.transaction(read_only=True) as tx:
            for name, served in tx.models.all_versions(project_id, MAX_INDEXED_VERSIONS):
                if served.artifact_id not in artifacts:
                    artifacts[served.artifact_id] = tx.artifacts.get(project_id, served.artifact_id)
                artifact = artifacts[served.artifact_id]
                if artifact is not None:
                    found.append((name, served.version, artifact))
        return [IndexedVersion(name, v, self._resolved(a, v)) for name, v, a in found]

    def _resolved(self, artifact: Artifact, version: int | None) -> ResolvedArtifact:
        identity, source = program_source(self.store.blobs, artifact.sha256, artifact.data)
        return ResolvedArtifact(
            sha256=identity,
            source=source,
            methods=tuple(m.name for m in artifact.methods),
            names={m.name: tensor_names(m) for m in artifact.methods},
            signatures={m.name: m for m in artifact.methods},
            version=version,
            unrunnable=self._unrunnable(artifact),
        )

    def _unrunnable(self, artifact: Artifact) -> dict[str, tuple[str, ...]]:
        """Per method, the backends it delegates to that this host cannot execute."""
        used = {m.name: method_backends(artifact.report, m.name) for m in artifact.methods}
        if not any(used.values()):
            return {}  # portable only (or an uploaded .pte): no need to ask the runtime
        if self._executable is None:  # asked once, at the first delegated artifact
            self._executable = frozenset(executable_backend_ids())
        missing = {m: tuple(sorted(ids - self._executable)) for m, ids in used.items()}
        return {m: ids for m, ids in missing.items() if ids}


def _model_version(
    tx: Transaction, project_id: str, name: str, version: str | None
) -> tuple[int, str] | None:
    """The number and artifact of the model's latest version, or of ``version``."""
    number = version_number(version)
    if number is None:
        model = tx.models.get(project_id, name)
        number = None if model is None else model.latest_version
    if number is None:
        return None
    artifact_id = tx.models.artifact_id(project_id, name, number)
    return None if artifact_id is None else (number, artifact_id)


def tensor_names(method: MethodSignature) -> TensorNames:
    """The names a stored method spec gives its inputs and outputs, for ``/v2``."""
    return TensorNames(tuple(t.name for t in method.inputs), tuple(t.name for t in method.outputs))


def _weight_cache_library(settings: Settings) -> Path | None:
    """The XNNPACK weight-cache shim, built on first start; without it methods that share
    weights each hold a packed copy, so the service still runs, only with more memory."""
    try:
        return build_xnnpack_options(settings.home / "native")
    except NativeBuildError as exc:
        log.warning("XNNPACK weight cache off: %s", exc)
        return None


def start_runtime_pool(settings: Settings) -> RuntimePool:
    """The pool of runtime worker processes (blocks until they are up)."""
    return RuntimePool(
        settings.runtime_pool_size,
        settings.runtime_cache_bytes,
        settings.home / "runtime-cache",
        request_threads=settings.runtime_request_threads or None,
        request_timeout_s=settings.runtime_request_timeout_seconds,
        disk_cache_bytes=settings.runtime_disk_cache_bytes,
        weight_cache_library=_weight_cache_library(settings),
        restart_policy=RestartPolicy(attempts=settings.runtime_restart_attempts),
        session_limits=SessionLimits(
            settings.session_idle_seconds,
            settings.session_max_per_project,
            settings.session_memory_bytes,
            settings.session_memory_bytes_per_project or settings.session_memory_bytes // 2,
        ),
        crash_limits=CrashLimits(
            settings.runtime_crashes_per_project, settings.runtime_crash_window_seconds
        ),
    )


def store_inference_state(
    services: Services,
    pool: RuntimePool,
    registry: CollectorRegistry,
    *,
    token_ttl_s: float = DEFAULT_TOKEN_TTL_S,
    artifact_ttl_s: float = DEFAULT_RESOLVE_TTL_S,
) -> InferenceState:
    """The state the app's lifespan sets as ``app.state.inference``: ``/v2`` over ``pool``,
    authenticated like ``/v1``, with ``/metrics`` serving ``registry`` (the /v2 metrics added),
    bounded as the services' settings say (request bodies, slow generation streams,
    ``/metrics`` token) and counting requests in the services' memory, as ``/v1`` does.

    To keep database transactions off the per-request path, a resolved token is trusted for
    ``token_ttl_s`` and a resolved artifact for ``artifact_ttl_s`` seconds (1 s each by
    default): revoking a token or deleting an artifact takes effect on ``/v2`` within that.
    """
    settings, store = services.settings, services.store
    token = settings.metrics_token
    return new_inference_state(
        StoreArtifactResolver(store),
        pool,
        cached_principal(store, TtlCache(token_ttl_s)),
        registry,
        server_version=__version__,
        resolve_ttl_s=artifact_ttl_s,
        max_request_bytes=settings.max_infer_request_bytes,
        metrics_token=token.get_secret_value() if token is not None else None,
        streams=StreamLimits(settings.stream_send_timeout_seconds, settings.stream_buffer_bytes),
        memory=services.memory,
    )
