"""Chunked, content-addressed, deduplicated, verified blob storage."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import delete, func, select, update

from pteforge.storage import (
    BlobIntegrityError,
    BlobNotFoundError,
    BlobRef,
    InvalidRangeError,
    SqlStore,
)
from pteforge.storage.models import BlobChunkRow, BlobRow, BlobUploadRow
from pteforge.storage.sql.chunks import chunk_digest, rechunk

CHUNK = 4096  # the conftest store's chunk size


def _count(store: SqlStore, table: type) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def _pieces(data: bytes, sizes: list[int]) -> Iterator[bytes]:
    start = 0
    for size in sizes:
        yield data[start : start + size]
        start += size
    yield data[start:]


def test_multi_chunk_round_trip_from_uneven_pieces(store: SqlStore) -> None:
    data = os.urandom(5 * CHUNK + 123)
    ref = store.blobs.write(_pieces(data, [1, 4095, 10000, 3]))
    assert ref == BlobRef(hashlib.sha256(data).hexdigest(), len(data))
    chunks = list(store.blobs.open(ref.sha256))
    assert [len(c) for c in chunks] == [CHUNK] * 5 + [123]
    assert b"".join(chunks) == data
    assert store.blobs.stat(ref.sha256) == ref
    assert _count(store, BlobChunkRow) == 6


def test_empty_blob(store: SqlStore) -> None:
    ref = store.blobs.write([])
    assert ref.size == 0
    assert store.blobs.read_bytes(ref.sha256) == b""


def test_identical_content_is_stored_once(store: SqlStore) -> None:
    data = os.urandom(3 * CHUNK)
    first = store.blobs.write([data])
    second = store.blobs.write(_pieces(data, [100, 5000]))
    assert first == second
    assert _count(store, BlobRow) == 1
    assert _count(store, BlobUploadRow) == 1
    assert _count(store, BlobChunkRow) == 3


def test_missing_blob_is_reported_before_streaming(store: SqlStore) -> None:
    with pytest.raises(BlobNotFoundError):
        store.blobs.open("0" * 64)
    with pytest.raises(BlobNotFoundError):
        store.blobs.read_range("0" * 64, 0, 1)
    assert not store.blobs.exists("0" * 64)


@pytest.mark.parametrize(
    ("offset", "length"),
    [(0, 1), (0, 4096), (4095, 2), (4096, 4096), (100, 3 * 4096 - 100),
     (10000, 3 * 4096 + 7 - 10000), (5, 0), (3 * 4096 + 6, 1)],
)  # fmt: skip
def test_ranged_reads(store: SqlStore, offset: int, length: int) -> None:
    data = os.urandom(3 * CHUNK + 7)
    ref = store.blobs.write([data])
    assert (
        b"".join(store.blobs.read_range(ref.sha256, offset, length))
        == data[offset : offset + length]
    )


@pytest.mark.parametrize(("offset", "length"), [(-1, 1), (0, 101), (100, 1), (50, -1)])
def test_ranges_outside_the_blob_are_rejected(store: SqlStore, offset: int, length: int) -> None:
    ref = store.blobs.write([os.urandom(100)])
    with pytest.raises(InvalidRangeError):
        store.blobs.read_range(ref.sha256, offset, length)


def _tamper(
    store: SqlStore, blob: str, seq: int, data: bytes, digest: bool, **values: object
) -> None:
    """Overwrite a chunk's bytes, with (``digest``) or without a matching recorded digest."""
    values["data"] = data
    if digest:
        values["blake3"] = chunk_digest(data)
    upload = select(BlobRow.upload_id).where(BlobRow.sha256 == blob).scalar_subquery()
    with store.engine.begin() as conn:
        conn.execute(
            update(BlobChunkRow)
            .where(BlobChunkRow.upload_id == upload, BlobChunkRow.seq == seq)
            .values(**values)
        )


def test_corrupted_chunk_is_never_served(store: SqlStore) -> None:
    data = os.urandom(3 * CHUNK)
    ref = store.blobs.write([data])
    flipped = bytearray(data[CHUNK : 2 * CHUNK])
    flipped[1234] ^= 0x01
    _tamper(store, ref.sha256, 1, bytes(flipped), digest=False)
    served: list[bytes] = []
    with pytest.raises(BlobIntegrityError, match="chunk 1 does not match") as caught:
        served.extend(store.blobs.open(ref.sha256))
    assert caught.value.sha256 == ref.sha256
    assert served == [data[:CHUNK]]  # only the good chunk before it
    with pytest.raises(BlobIntegrityError):
        list(store.blobs.read_range(ref.sha256, CHUNK + 10, 5))
    assert b"".join(store.blobs.read_range(ref.sha256, 0, CHUNK)) == data[:CHUNK]


def test_missing_chunk_fails_the_read(store: SqlStore) -> None:
    ref = store.blobs.write([os.urandom(3 * CHUNK)])
    upload = select(BlobRow.upload_id).where(BlobRow.sha256 == ref.sha256).scalar_subquery()
    with store.engine.begin() as conn:
        conn.execute(
            delete(BlobChunkRow).where(BlobChunkRow.upload_id == upload, BlobChunkRow.seq == 2)
        )
    with pytest.raises(BlobIntegrityError, match="chunk 2 is missing"):
        list(store.blobs.open(ref.sha256))


def test_chunks_from_before_blake3_are_verified_by_their_sha256(store: SqlStore) -> None:
    data = os.urandom(2 * CHUNK)
    ref = store.blobs.write([data])
    second = data[CHUNK:]
    legacy = {"blake3": None, "sha256": hashlib.sha256(second).hexdigest()}
    _tamper(store, ref.sha256, 1, second, digest=False, **legacy)
    assert store.blobs.read_bytes(ref.sha256) == data
    flipped = second[:-1] + bytes([second[-1] ^ 1])  # b"?" was the same byte 1 run in 256
    _tamper(store, ref.sha256, 1, flipped, digest=False, **legacy)
    with pytest.raises(BlobIntegrityError, match="chunk 1 does not match"):
        store.blobs.read_bytes(ref.sha256)
    _tamper(store, ref.sha256, 1, second, digest=False, blake3=None, sha256=None)
    with pytest.raises(BlobIntegrityError, match="chunk 1 has no recorded digest"):
        store.blobs.read_bytes(ref.sha256)


def test_export_to_file_is_atomic_and_verified(store: SqlStore, tmp_path: Path) -> None:
    data = os.urandom(2 * CHUNK + 1)
    ref = store.blobs.write([data])
    target = tmp_path / "cache" / f"{ref.sha256}.pte"
    assert store.blobs.export_to_file(ref.sha256, target) == ref
    assert target.read_bytes() == data
    _tamper(store, ref.sha256, 2, b"xy", digest=True)  # a wrong length, digest matching
    bad_target = tmp_path / "cache" / "bad.pte"
    with pytest.raises(BlobIntegrityError, match="chunk 2 has 2 bytes, expected 1"):
        store.blobs.export_to_file(ref.sha256, bad_target)
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_failed_write_leaves_nothing(store: SqlStore) -> None:
    def failing() -> Iterator[bytes]:
        yield os.urandom(3 * CHUNK)
        raise ConnectionError("client went away")

    with pytest.raises(ConnectionError):
        store.blobs.write(failing())
    assert _count(store, BlobUploadRow) == 0
    assert _count(store, BlobChunkRow) == 0


def test_garbage_collection_spares_fresh_uploads_and_referenced_content(
    store: SqlStore,
) -> None:
    kept = store.blobs.write([b"referenced"])
    loose = store.blobs.write([b"never referenced"])
    with store.transaction() as tx:
        project = tx.projects.create("p")
        tx.programs.create(project.id, "m", kept, [])
    assert store.blobs.collect_garbage(older_than=timedelta(hours=1)) == 0
    assert store.blobs.exists(loose.sha256)
    clock = store.blobs._clock  # the conftest ManualClock
    clock.advance(timedelta(hours=2))  # type: ignore[attr-defined]
    store.blobs.collect_garbage(older_than=timedelta(hours=1))
    assert not store.blobs.exists(loose.sha256)
    assert store.blobs.read_bytes(kept.sha256) == b"referenced"


def test_rechunk_regroups_any_piece_sizes_exactly() -> None:
    rng = random.Random(1)
    for _ in range(300):
        size = rng.choice([1, 3, 7, 16])
        data = rng.randbytes(rng.randrange(0, 100))
        cuts = sorted(rng.randrange(0, len(data) + 1) for _ in range(rng.randrange(0, 8)))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        out = list(rechunk(pieces, size))
        assert b"".join(out) == data
        assert all(len(c) == size for c in out[:-1])
        assert not out or 0 < len(out[-1]) <= size


def test_concurrent_identical_writes_store_one_copy(store: SqlStore) -> None:
    data = os.urandom(8 * CHUNK)
    with ThreadPoolExecutor(4) as pool:
        refs = list(pool.map(lambda _: store.blobs.write(_pieces(data, [CHUNK] * 3)), range(4)))
    assert len(set(refs)) == 1
    assert _count(store, BlobRow) == 1
    assert _count(store, BlobUploadRow) == 1
    assert _count(store, BlobChunkRow) == 8
    assert store.blobs.read_bytes(refs[0].sha256) == data
