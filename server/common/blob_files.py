"""Moving a file on disk into the content-addressed blob store, chunk by chunk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pteforge.storage.blobs import BlobStore
from pteforge.storage.domain import BlobRef


def file_chunks(path: Path, size: int) -> Iterator[bytes]:
    """The file's bytes in ``size``-byte chunks."""
    with path.open("rb") as f:
        while chunk := f.read(size):
            yield chunk


def store_file(blobs: BlobStore, path: Path) -> BlobRef:
    """Stream ``path`` into ``blobs``; returns its sha256 and size."""
    return blobs.write(file_chunks(path, blobs.chunk_size))
