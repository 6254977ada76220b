"""A stored artifact as the runtime pool takes it: its identity and where its files come
from (its ``.pte``, and the ``.ptd`` holding its constants if it has one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pteforge.runtime.artifact_files import ArtifactSource, WithData, program_identity
from pteforge.storage.blobs import BlobStore


def stored_writer(blobs: BlobStore, sha256: str) -> Callable[[Path], None]:
    """Writes the stored content ``sha256`` to a path, its sha256 checked while copying."""

    def write(path: Path) -> None:
        blobs.export_to_file(sha256, path)

    return write


def program_source(
    blobs: BlobStore, pte_sha256: str, data_sha256: str | None
) -> tuple[str, ArtifactSource]:
    """The program's identity (the ``.pte``'s sha256, or a digest of both files': the same
    ``.pte`` with another ``.ptd`` is another program to every cache) and its source."""
    identity = program_identity(pte_sha256, data_sha256)
    program = stored_writer(blobs, pte_sha256)
    if data_sha256 is None:
        return identity, program
    return identity, WithData(program, stored_writer(blobs, data_sha256))
