"""The interface to binary content, stored content-addressed by sha256 in fixed-size chunks."""

from __future__ import annotations

import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path

from pteforge.storage.domain import BlobRef
from pteforge.storage.errors import BlobNotFoundError

DEFAULT_CHUNK_SIZE = 1024 * 1024


class BlobStore(ABC):
    """Streams content in and out without ever holding a whole blob in memory.

    Content is written outside any caller transaction: it stays invisible until it is complete
    and verified, and identical content is stored once. Rows that reference content (programs,
    artifacts) are written afterwards in the caller's transaction.
    """

    chunk_size: int

    @abstractmethod
    def write(self, chunks: Iterable[bytes]) -> BlobRef:
        """Store the concatenation of ``chunks`` (any sizes); returns its sha256 and size."""

    @abstractmethod
    def stat(self, sha256: str) -> BlobRef | None:
        """The stored content with this sha256, or None."""

    def exists(self, sha256: str) -> bool:
        """Whether content with this sha256 is stored."""
        return self.stat(sha256) is not None

    @abstractmethod
    def open(self, sha256: str) -> Iterator[bytes]:
        """Stream the content in chunks.

        Raises :class:`BlobNotFoundError` at once when absent. Each chunk's length and bytes are
        checked, before it is yielded, against the length implied by the blob's size and the
        collision-resistant digest recorded when the content was written; a missing, short,
        long or altered chunk raises :class:`BlobIntegrityError` from the iterator, and nothing
        of it is yielded. The writer computed the content's sha256 over exactly the chunks whose
        digests it recorded, so a read that completes yields content with that sha256. The
        whole hash is not recomputed: a rewrite of a chunk's bytes *together with* its recorded
        digest (deliberate tampering with the database, not corruption) is not detected.
        """

    @abstractmethod
    def read_range(self, sha256: str, offset: int, length: int) -> Iterator[bytes]:
        """Stream ``length`` bytes from ``offset`` (for HTTP Range), each chunk verified as in open.

        Raises :class:`BlobNotFoundError` or :class:`InvalidRangeError` at once.
        """

    def read_bytes(self, sha256: str) -> bytes:
        """The whole content in memory, verified; for small blobs only."""
        return b"".join(self.open(sha256))

    def export_to_file(self, sha256: str, path: Path) -> BlobRef:
        """Write the content to ``path`` atomically: a verified temp file renamed into place."""
        ref = self.stat(sha256)
        if ref is None:
            raise BlobNotFoundError(f"blob {sha256} not found")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with tmp.open("wb") as out:
                for chunk in self.open(sha256):
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return ref

    @abstractmethod
    def collect_garbage(self, older_than: timedelta) -> int:
        """Remove abandoned uploads and unreferenced content older than ``older_than``.

        Returns how many uploads were removed.
        """
