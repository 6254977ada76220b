"""A stored artifact as the runtime pool takes it: its identity and where its files come
from (its ``.pte``, and the ``.ptd`` holding its constants if it has one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pteforge.runtime.artifact_files import ArtifactSource, WithData, program_identity
from pteforge.storage.blobs import BlobStore
from pteforge.storage.domain import BlobRef


def stored_writer(blobs: BlobStore, sha256: str) -> Callable[[Path], None]:
    """Writes the stored content ``sha256`` to a path, its sha256 checked while copying."""

    def write(path: Path) -> None:
        blobs.export_to_file(sha256, path)

    return write


def program_source(
    blobs: BlobStore, pte_sha256: str, data: BlobRef | None
) -> tuple[str, ArtifactSource]:
    """The program's identity (the ``.pte``'s sha256, or with its ``.ptd`` ``data`` a digest
    of both files': the same ``.pte`` with another ``.ptd`` is another program to every
    cache) and its source."""
    program = stored_writer(blobs, pte_sha256)
    if data is None:
        return program_identity(pte_sha256, None), program
    identity = program_identity(pte_sha256, data.sha256)
    return identity, WithData(program, stored_writer(blobs, data.sha256))
