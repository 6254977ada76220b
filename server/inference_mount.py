"""Wiring the ``/v2`` inference router to storage and a runtime pool from settings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI
from prometheus_client import CollectorRegistry

from pteforge import __version__
from pteforge.runtime import RuntimePool
from pteforge.server.auth.dependencies import Principal, require_principal
from pteforge.server.inference import ResolvedArtifact, build_inference_router
from pteforge.server.settings import Settings
from pteforge.storage.store import Store


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
        )

    def _writer(self, sha256: str) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            self.store.blobs.export_to_file(sha256, path)  # sha256 checked while copying

        return write


def start_runtime_pool(settings: Settings) -> RuntimePool:
    """The pool of runtime worker processes (blocks until they are up)."""
    return RuntimePool(
        settings.runtime_pool_size,
        settings.runtime_cache_bytes,
        settings.home / "runtime-cache",
        request_timeout_s=settings.runtime_request_timeout_seconds,
    )


def _expose_principal_annotation() -> None:
    """Work around the router's endpoints naming ``Principal``, an alias local to
    ``build_inference_router``: under postponed annotations FastAPI resolves it in the
    module's globals, finds nothing and asks for a ``principal`` query parameter. Only
    takes effect while the module defines no such global itself."""
    from pteforge.server.inference import routes

    if not hasattr(routes, "Principal"):
        routes.Principal = Annotated[Any, Depends(require_principal)]  # type: ignore[attr-defined]


def mount_inference(app: FastAPI, store: Store, pool: RuntimePool) -> None:
    """Add ``/v2`` (and ``/metrics``) to ``app``, authenticated like ``/v1``."""
    _expose_principal_annotation()
    router = build_inference_router(
        StoreArtifactResolver(store),
        pool,
        require_principal,
        CollectorRegistry(),
        server_version=__version__,
    )
    app.include_router(router)
