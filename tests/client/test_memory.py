"""Uploads and downloads stream: the client's own memory stays flat while 512 MiB go over a
real socket each way (a program upload the server reads whole, then refuses; a download of a
512 MiB artifact put in the server's store)."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pteforge.client import Client, UploadRejectedError
from pteforge.storage import default_sqlite_url, open_store
from tests.server.service import ServiceProcess

BIG = 512 * 1024 * 1024
CHUNK = 1024 * 1024
FLAT = 16 * 1024 * 1024  # traced peak allowed while 512 MiB stream through


def _peak_traced(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()``'s result and the peak of Python memory it allocated (tracemalloc)."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    except BaseException as exc:
        exc.add_note(f"peak traced: {tracemalloc.get_traced_memory()[1]} bytes")
        raise
    finally:
        tracemalloc.stop()


def _zeros() -> Iterator[bytes]:
    block = bytes(CHUNK)
    for _ in range(BIG // CHUNK):
        yield block


@pytest.mark.slow
def test_a_512_mib_upload_streams(client: Client, tmp_path: Path) -> None:
    big = tmp_path / "big.pt2"
    with big.open("wb") as f:  # sparse: no disk used here, still 512 MiB to read and send
        f.truncate(BIG)

    def upload() -> BaseException:
        with pytest.raises(UploadRejectedError) as info:  # read whole by the server, then refused
            client.upload_program({"forward": big})
        return info.value

    error, peak = _peak_traced(upload)
    assert error.code == "not_a_zip"
    assert peak < FLAT, f"client peak {peak / 2**20:.1f} MiB while uploading 512 MiB"


@pytest.mark.slow
def test_a_512_mib_download_streams(
    client: Client, service: ServiceProcess, tmp_path: Path
) -> None:
    store = open_store(default_sqlite_url(service.home), migrate=False)
    try:
        blob = store.blobs.write(_zeros())
        with store.transaction() as tx:
            project = tx.projects.get_by_name("default")
            assert project is not None
            big = tx.artifacts.create(project.id, None, blob, {}, "memory-test", {}, [])
    finally:
        store.close()
    out = tmp_path / "big.pte"
    try:
        path, peak = _peak_traced(lambda: client.download(big.id, out))
        assert path.stat().st_size == BIG
        assert peak < FLAT, f"client peak {peak / 2**20:.1f} MiB while downloading 512 MiB"
        with path.open("rb") as f:
            assert hashlib.file_digest(f, "sha256").hexdigest() == blob.sha256
    finally:
        out.unlink(missing_ok=True)
        client.delete_artifact(big.id)
    assert os.listdir(tmp_path) == []
