"""What the /v2 routes need from the rest of the server: artifacts by project-scoped id or
model name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pteforge.runtime import ArtifactSource, MethodSignature, TensorNames
from pteforge.server.auth.dependencies import Principal
from pteforge.server.inference.statuses import InvalidVersionError
from pteforge.storage.model_names import MAX_VERSION


@dataclass(frozen=True)
class ResolvedArtifact:
    """An artifact the caller may run: its content hash, where its bytes come from, its methods.

    ``sha256`` is the program's identity: its ``.pte``'s sha256, or with a ``.ptd`` a digest
    of both (``runtime.artifact_files.program_identity``). ``source`` is a local ``Path``, a
    callable that writes the ``.pte`` to the path it is given (called at most once per
    identity; the pool caches the file on local disk), or a ``WithData`` of two of them.
    ``names`` holds, per method, the program's own input and output names (from its graph
    signature); a method without them is served under positional names (``input_0``).
    ``signatures`` holds, per method, the stored signature, whose static dimensions pin the
    ``.pte``'s dynamic inputs (:meth:`MethodSignature.pinned_by`).
    """

    sha256: str
    source: ArtifactSource
    methods: tuple[str, ...]
    names: Mapping[str, TensorNames] = field(default_factory=dict)
    signatures: Mapping[str, MethodSignature] = field(default_factory=dict)
    version: int | None = None
    """The model version this artifact serves as resolved (a model name's latest, or the
    version named); None for an artifact id. Statistics count the request under it."""
    unrunnable: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per method that cannot run here, the backend ids it delegates to that this host's
    runtime does not register (compile-only targets: CoreML, Vulkan); ``/v2`` ready says
    not ready for it."""
    served: dict[str, MethodSignature] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """Per method, the signature requests are checked against, once worked out (the
    runtime's, named and pinned: ``work.model_of``): this object lives as long as the
    resolve cache keeps it, and the same sha256 always has the same runtime signature."""


class ArtifactResolver(Protocol):
    """Looks up artifacts for the /v2 routes (implemented by the server over storage)."""

    def resolve(
        self, principal: Principal, model: str, version: str | None = None
    ) -> ResolvedArtifact | None:
        """The artifact ``model`` names if ``principal`` (the caller the auth function
        returned) may see it, else ``None`` (answered as 404, also for another project's).

        ``model`` is the part of a /v2 model before the method: an artifact id, or where the
        resolver knows model names, a model name (its latest version, or ``version`` from a
        ``/versions/{version}`` path, a number: ``version_number``; the version means nothing
        to an artifact id)."""
        ...

    def index(self, principal: Principal) -> list[IndexedVersion]:
        """The caller's model names' versions, each with its artifact (at most
        :data:`MAX_INDEXED_VERSIONS`, by name then version), for the model repository
        index."""
        ...


MAX_INDEXED_VERSIONS = 1000
"""Most model versions one repository index lists (read in one query, each artifact once: a
project with many versions must not make an index a query per version)."""


@dataclass(frozen=True)
class IndexedVersion:
    """A version of a model name and the artifact it serves."""

    name: str
    version: int
    artifact: ResolvedArtifact


def version_number(version: str | None) -> int | None:
    """The model version a ``/v2`` path names (``/versions/{version}/...``; None: the
    latest), the one parse every ``/v2`` route (infer, metadata, ready, stats, generate)
    and gRPC use: 400 naming it when it is not a number (ASCII digits: ``int()`` refuses
    some that ``isdigit`` takes, and a 5000-digit one) or past the largest a version can
    have, whatever the model."""
    if version is None:
        return None
    if not (version.isascii() and version.isdigit()):
        raise InvalidVersionError(
            f"model version {version[:40]!r} must be a number (1, 2, ...: digits only)"
        )
    if len(version) > len(str(MAX_VERSION)) or int(version) > MAX_VERSION:
        raise InvalidVersionError(
            f"model version {version[:40]!r} is past the largest one, {MAX_VERSION}"
        )
    return int(version)
