"""Wiring the ``/v2`` inference router to storage and a runtime pool from settings."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from pteforge import __version__
from pteforge.runtime import RuntimePool, TensorNames
from pteforge.runtime.native import NativeBuildError, build_xnnpack_options
from pteforge.runtime.sessions import SessionLimits
from pteforge.server.auth.cache import TtlCache
from pteforge.server.auth.dependencies import DEFAULT_TOKEN_TTL_S, Principal, cached_principal
from pteforge.server.inference import ResolvedArtifact, build_inference_router
from pteforge.server.inference.routes import DEFAULT_MAX_REQUEST_BYTES, DEFAULT_RESOLVE_TTL_S
from pteforge.server.settings import Settings
from pteforge.storage.domain import MethodSpec
from pteforge.storage.store import Store

log = logging.getLogger(__name__)


class StoreArtifactResolver:
    """Project-scoped artifact lookup for ``/v2``; bytes come from the verified blob store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def resolve(self, principal: Any, artifact_id: str) -> ResolvedArtifact | None:
        assert isinstance(principal, Principal)
        with self.store.transaction() as tx:
            artifact = tx.artifacts.get(principal.project_id, artifact_id)
        if artifact is None:
            return None
        return ResolvedArtifact(
            sha256=artifact.sha256,
            source=self._writer(artifact.sha256),
            methods=tuple(m.name for m in artifact.methods),
            names={m.name: tensor_names(m) for m in artifact.methods},
        )

    def _writer(self, sha256: str) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            self.store.blobs.export_to_file(sha256, path)  # sha256 checked while copying

        return write


def tensor_names(method: MethodSpec) -> TensorNames:
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
        request_timeout_s=settings.runtime_request_timeout_seconds,
        disk_cache_bytes=settings.runtime_disk_cache_bytes,
        weight_cache_library=_weight_cache_library(settings),
        session_limits=SessionLimits(
            settings.session_idle_seconds,
            settings.session_max_per_project,
            settings.session_memory_bytes,
        ),
    )


def mount_inference(
    app: FastAPI,
    store: Store,
    pool: RuntimePool,
    *,
    token_ttl_s: float = DEFAULT_TOKEN_TTL_S,
    artifact_ttl_s: float = DEFAULT_RESOLVE_TTL_S,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    registry: CollectorRegistry | None = None,
) -> None:
    """Add ``/v2`` (and ``/metrics``, serving ``registry`` with the /v2 metrics added) to
    ``app``, authenticated like ``/v1``.

    To keep database transactions off the per-request path, a resolved token is trusted for
    ``token_ttl_s`` and a resolved artifact for ``artifact_ttl_s`` seconds (1 s each by
    default): revoking a token or deleting an artifact takes effect on ``/v2`` within that.
    """
    router = build_inference_router(
        StoreArtifactResolver(store),
        pool,
        cached_principal(store, TtlCache(token_ttl_s)),
        registry or CollectorRegistry(),
        server_version=__version__,
        resolve_ttl_s=artifact_ttl_s,
        max_request_bytes=max_request_bytes,
    )
    app.include_router(router)
