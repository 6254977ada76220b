"""What the /v2 routes need from the rest of the server: artifacts by project-scoped id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pteforge.runtime import ArtifactSource


@dataclass(frozen=True)
class ResolvedArtifact:
    """An artifact the caller may run: its content hash, where its bytes come from, its methods.

    ``source`` is a local ``Path`` or a callable that writes the ``.pte`` to the path it is
    given (called at most once per sha256; the pool caches the file on local disk).
    """

    sha256: str
    source: ArtifactSource
    methods: tuple[str, ...]


class ArtifactResolver(Protocol):
    """Looks up artifacts for the /v2 routes (implemented by the server over storage)."""

    def resolve(self, principal: Any, artifact_id: str) -> ResolvedArtifact | None:
        """The artifact ``artifact_id`` if ``principal`` (what the auth dependency returned)
        may see it, else ``None`` (answered as 404, also for another project's artifact)."""
        ...
