"""Spooling an upload to disk under a size limit."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

from pteforge.server.sandbox import UploadTooLargeError, spool_upload


def test_spool_hashes_and_writes(tmp_path: Path) -> None:
    body = b"x" * 3_000_000
    spooled = spool_upload(io.BytesIO(body), tmp_path, max_bytes=len(body))
    assert spooled.path.read_bytes() == body
    assert spooled.sha256 == hashlib.sha256(body).hexdigest()
    assert spooled.size_bytes == len(body)


def test_spool_stops_at_the_limit_and_cleans_up(tmp_path: Path) -> None:
    with pytest.raises(UploadTooLargeError) as info:
        spool_upload(io.BytesIO(b"x" * 3_000_000), tmp_path, max_bytes=2_000_000)
    assert info.value.http_status == 413
    assert list(tmp_path.iterdir()) == []
