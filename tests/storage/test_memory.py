"""Writing and reading stream: memory stays far below the blob size."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from collections.abc import Iterator

from pteforge.storage import open_store

MIB = 1024 * 1024
BLOB_MIB = 64
PEAK_LIMIT = 16 * MIB  # a quarter of the blob; the design needs about 5 chunks


def _pieces(digest: hashlib._Hash) -> Iterator[bytes]:
    piece = os.urandom(MIB)
    for i in range(BLOB_MIB):
        # distinct content per MiB, built on the fly: the whole blob never exists here
        chunk = i.to_bytes(8, "little") + piece[8:]
        digest.update(chunk)
        yield chunk


def test_write_and_read_stream_in_bounded_memory(database_url: str) -> None:
    store = open_store(database_url)
    expected = hashlib.sha256()
    tracemalloc.start()
    try:
        ref = store.blobs.write(_pieces(expected))
        _, write_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        size = 0
        for chunk in store.blobs.open(ref.sha256):  # each chunk verified
            size += len(chunk)
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        store.close()
    assert (ref.sha256, ref.size, size) == (expected.hexdigest(), BLOB_MIB * MIB, BLOB_MIB * MIB)
    print(f"peaks: write {write_peak / MIB:.1f} MiB, read {read_peak / MIB:.1f} MiB")
    assert write_peak < PEAK_LIMIT, f"writer peaked at {write_peak / MIB:.1f} MiB"
    assert read_peak < PEAK_LIMIT, f"reader peaked at {read_peak / MIB:.1f} MiB"
