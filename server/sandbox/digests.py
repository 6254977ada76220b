"""Content digests: every stored upload is identified, and re-checked, by its sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .errors import UploadRejectedError

_CHUNK = 1024 * 1024


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def read_verified(path: str | Path, expected_sha256: str) -> bytes:
    """The file's bytes, only if they hash to ``expected_sha256``.

    Load from the returned bytes, not from the path again, so the file cannot change between
    the check and the load.
    """
    data = Path(path).read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256.lower():
        raise UploadRejectedError(
            "sha256_mismatch", f"content hashes to {actual}, expected {expected_sha256}", str(path)
        )
    return data
