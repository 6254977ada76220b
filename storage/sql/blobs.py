"""Content-addressed blobs in fixed-size chunks in the database.

A write streams chunks into a fresh *upload* (committed in small batches, so no lock is held
while the caller produces data) and only then publishes a ``blobs`` row naming that upload. A
writer killed half-way leaves an upload that no blob row points at: invisible to readers, never
mistaken for content, and removed by :meth:`SqlBlobStore.collect_garbage`.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, exists, insert, select
from sqlalchemy import exc as sa_exc

from pteforge.storage.blobs import DEFAULT_CHUNK_SIZE, BlobStore
from pteforge.storage.domain import BlobRef
from pteforge.storage.engine import reader
from pteforge.storage.errors import (
    BlobIntegrityError,
    BlobNotFoundError,
    InvalidRangeError,
)
from pteforge.storage.ids import new_id
from pteforge.storage.models import BlobRow, BlobUploadRow
from pteforge.storage.sql.chunks import chunk_digest, fetch_chunk, insert_chunks, rechunk
from pteforge.storage.sql.errors import translated
from pteforge.storage.sql.references import delete_upload, referenced, release_blob

__all__ = ["SqlBlobStore", "rechunk"]

DEFAULT_CHUNKS_PER_COMMIT = 4
PG_PARALLELISM = 2
# Chunks fetched and verified ahead of the consumer, each by its own thread (fetching and
# hashing release the GIL). A PostgreSQL backend spends most of a fetch reassembling the value
# from its TOAST slices, so more of them in parallel pay off there (measured: 4 best on 2 cores).
SQLITE_READ_AHEAD = 2
PG_READ_AHEAD = 4


@dataclass(frozen=True)
class _Located:
    sha256: str
    size: int
    chunk_size: int
    upload_id: str

    def chunk_length(self, seq: int) -> int:
        return min(self.chunk_size, self.size - seq * self.chunk_size)

    @property
    def chunk_count(self) -> int:
        return -(-self.size // self.chunk_size)


class SqlBlobStore(BlobStore):
    """:class:`BlobStore` over the ``blob_uploads``, ``blob_chunks`` and ``blobs`` tables."""

    def __init__(
        self,
        engine: Engine,
        clock: Callable[[], datetime],
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        chunks_per_commit: int | None = None,
    ) -> None:
        postgres = engine.dialect.name == "postgresql"
        # PostgreSQL stores chunks from parallel backends; SQLite has one writer at a time.
        # Either way about DEFAULT_CHUNKS_PER_COMMIT chunks are in flight.
        self._parallelism = PG_PARALLELISM if postgres else 1
        self._read_ahead = PG_READ_AHEAD if postgres else SQLITE_READ_AHEAD
        if chunks_per_commit is None:
            chunks_per_commit = max(1, DEFAULT_CHUNKS_PER_COMMIT // self._parallelism)
        if chunk_size <= 0 or chunks_per_commit <= 0:
            raise ValueError("chunk_size and chunks_per_commit must be positive")
        self._engine = engine
        self._read_engine = reader(engine)
        self._clock = clock
        self.chunk_size = chunk_size
        self._chunks_per_commit = chunks_per_commit

    def write(self, chunks: Iterable[bytes]) -> BlobRef:
        upload_id = new_id("upl")
        with translated(), self._engine.begin() as conn:
            conn.execute(insert(BlobUploadRow).values(id=upload_id, started_at=self._clock()))
        try:
            ref = self._write_chunks(upload_id, chunks)
            return self._publish(upload_id, ref)
        except BaseException:
            self._discard_quietly(upload_id)
            raise

    def _write_chunks(self, upload_id: str, chunks: Iterable[bytes]) -> BlobRef:
        """Hash the whole stream here while helper threads digest and insert earlier batches."""
        whole = hashlib.sha256()
        size = 0
        batch: list[tuple[int, bytes]] = []
        in_flight: deque[Future[None]] = deque()
        with ThreadPoolExecutor(self._parallelism, thread_name_prefix="blob-writer") as pool:
            for seq, chunk in enumerate(rechunk(chunks, self.chunk_size)):
                batch.append((seq, chunk))
                if len(batch) >= self._chunks_per_commit:
                    if len(in_flight) >= self._parallelism:
                        in_flight.popleft().result()
                    in_flight.append(pool.submit(self._insert_chunks, upload_id, batch))
                    batch = []
                # After the hand-off, so the helper inserts while this thread hashes.
                whole.update(chunk)
                size += len(chunk)
            if batch:
                in_flight.append(pool.submit(self._insert_chunks, upload_id, batch))
            while in_flight:
                in_flight.popleft().result()
        return BlobRef(sha256=whole.hexdigest(), size=size)

    def _insert_chunks(self, upload_id: str, chunks: list[tuple[int, bytes]]) -> None:
        rows = [(seq, chunk_digest(data), data) for seq, data in chunks]  # outside the lock
        with translated(), self._engine.begin() as conn:
            insert_chunks(conn, upload_id, rows)

    def _publish(self, upload_id: str, ref: BlobRef) -> BlobRef:
        """Make the upload the content for its sha256, or drop it if that content exists."""
        try:
            with self._engine.begin() as conn:
                if _locate_in(conn, ref.sha256) is None:
                    conn.execute(
                        insert(BlobRow).values(
                            sha256=ref.sha256,
                            size=ref.size,
                            chunk_size=self.chunk_size,
                            upload_id=upload_id,
                            created_at=self._clock(),
                        )
                    )
                    return ref
                delete_upload(conn, upload_id)
                return ref
        except sa_exc.IntegrityError:
            # A concurrent writer published the same content first: keep theirs.
            self._discard_quietly(upload_id)
            return ref

    def _discard_quietly(self, upload_id: str) -> None:
        try:
            with self._engine.begin() as conn:
                delete_upload(conn, upload_id)
        except sa_exc.SQLAlchemyError:
            pass  # collect_garbage removes it later

    def stat(self, sha256: str) -> BlobRef | None:
        located = self._locate(sha256)
        return None if located is None else BlobRef(located.sha256, located.size)

    def open(self, sha256: str) -> Iterator[bytes]:
        located = self._require(sha256)
        return self._stream_all(located)

    def read_range(self, sha256: str, offset: int, length: int) -> Iterator[bytes]:
        located = self._require(sha256)
        if offset < 0 or length < 0 or offset + length > located.size:
            raise InvalidRangeError(
                f"range offset={offset} length={length} is outside blob {sha256} "
                f"of {located.size} bytes"
            )
        return self._stream_range(located, offset, length)

    def _stream_all(self, located: _Located) -> Iterator[bytes]:
        # No whole-content hash here: every chunk is checked against the digest recorded when
        # the writer hashed the whole content over exactly these chunks (see open()).
        yield from self._chunks(located, 0, located.chunk_count - 1)

    def _stream_range(self, located: _Located, offset: int, length: int) -> Iterator[bytes]:
        if length == 0:
            return
        first = offset // located.chunk_size
        last = (offset + length - 1) // located.chunk_size
        for seq, chunk in enumerate(self._chunks(located, first, last), start=first):
            start = seq * located.chunk_size
            lo = max(offset - start, 0)
            hi = min(offset + length - start, len(chunk))
            yield chunk if (lo, hi) == (0, len(chunk)) else chunk[lo:hi]

    def _chunks(self, located: _Located, first: int, last: int) -> Iterator[bytes]:
        """Verified chunks ``first..last``; helper threads fetch the next ones meanwhile."""
        upcoming: deque[Future[bytes]] = deque()
        with ThreadPoolExecutor(self._read_ahead, thread_name_prefix="blob-reader") as pool:
            for seq in range(first, last + 1):
                while len(upcoming) < self._read_ahead and seq + len(upcoming) <= last:
                    upcoming.append(pool.submit(self._read_chunk, located, seq + len(upcoming)))
                yield upcoming.popleft().result()

    def _read_chunk(self, located: _Located, seq: int) -> bytes:
        """One chunk, checked against its recorded length and digest before anyone sees it."""
        with translated(), self._reader() as conn:
            stored = fetch_chunk(conn, located.upload_id, seq)
        if stored is None:
            raise BlobIntegrityError(located.sha256, f"chunk {seq} is missing")
        return stored.verify(located.sha256, seq, located.chunk_length(seq))

    def collect_garbage(self, older_than: timedelta) -> int:
        cutoff = self._clock() - older_than
        removed = 0
        with translated(), self._engine.begin() as conn:
            for sha256 in (
                conn.execute(
                    select(BlobRow.sha256).where(
                        BlobRow.created_at < cutoff,
                        ~referenced(BlobRow.sha256),
                    )
                )
                .scalars()
                .all()
            ):
                release_blob(conn, sha256)
            orphans = (
                conn.execute(
                    select(BlobUploadRow.id).where(
                        BlobUploadRow.started_at < cutoff,
                        ~exists().where(BlobRow.upload_id == BlobUploadRow.id),
                    )
                )
                .scalars()
                .all()
            )
            for upload_id in orphans:
                delete_upload(conn, upload_id)
                removed += 1
        return removed

    def _require(self, sha256: str) -> _Located:
        located = self._locate(sha256)
        if located is None:
            raise BlobNotFoundError(f"blob {sha256} not found")
        return located

    def _locate(self, sha256: str) -> _Located | None:
        with translated(), self._reader() as conn:
            return _locate_in(conn, sha256)

    def _reader(self) -> Connection:
        return self._read_engine.connect()


def _locate_in(conn: Connection, sha256: str) -> _Located | None:
    row = conn.execute(
        select(BlobRow.size, BlobRow.chunk_size, BlobRow.upload_id).where(BlobRow.sha256 == sha256)
    ).one_or_none()
    if row is None:
        return None
    return _Located(sha256, row.size, row.chunk_size, row.upload_id)
