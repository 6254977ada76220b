"""Copy an upload stream to a private temp file under a size limit, hashing as it goes."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import UploadTooLargeError

_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class SpooledUpload:
    """A fully received upload on local disk; the caller deletes ``path`` when done."""

    path: Path
    sha256: str
    size_bytes: int


def spool_upload(
    stream: BinaryIO, directory: str | Path, max_bytes: int, suffix: str = ""
) -> SpooledUpload:
    """Write ``stream`` to a new file in ``directory``; never more than ``max_bytes``.

    Raises ``UploadTooLargeError`` (and removes the partial file) as soon as the limit is passed,
    so an endless body costs at most ``max_bytes`` of disk.
    """
    digest = hashlib.sha256()
    size = 0
    fd, name = tempfile.mkstemp(prefix="upload-", suffix=suffix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise UploadTooLargeError(
                        "upload_too_large", f"the upload exceeds {max_bytes} bytes"
                    )
                digest.update(chunk)
                out.write(chunk)
    except BaseException:
        os.unlink(name)
        raise
    return SpooledUpload(Path(name), digest.hexdigest(), size)
