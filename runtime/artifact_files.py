"""Local copies of artifacts that workers load by path, bounded by bytes on disk.

Each artifact is written once as ``{sha256}.pte`` (through a temp file renamed into place)
and reused by every worker. When the copies exceed ``capacity_bytes`` the least recently
used are deleted, but never one used within ``grace_s`` seconds: a request may be about to
open it. So the bound can be exceeded briefly while many artifacts are in use at once. A
worker that already mapped a deleted file keeps its mapping; the next request that needs the
file writes it again.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pteforge.runtime.errors import ArtifactIntegrityError

DEFAULT_GRACE_S = 300.0

# Where an artifact comes from: a local file, or a callable that writes it to the given path.
ArtifactSource = Path | Callable[[Path], None]


@dataclass
class _Copy:
    size: int
    last_used: float
    path: Path


class ArtifactFiles:
    """The directory of local artifact copies and its least-recently-used bookkeeping."""

    def __init__(
        self,
        directory: Path,
        capacity_bytes: int | None,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.capacity_bytes = capacity_bytes
        self.grace_s = grace_s
        self._clock = clock
        self._lock = threading.Lock()
        self._copies: OrderedDict[str, _Copy] = OrderedDict()
        directory.mkdir(parents=True, exist_ok=True)
        self._adopt_existing()

    def _adopt_existing(self) -> None:
        """Copies left by an earlier run count as least recently used, oldest first."""
        files = sorted(self.directory.glob("*.pte"), key=lambda p: p.stat().st_mtime)
        stale = self._clock() - self.grace_s - 1.0
        for path in files:
            self._copies[path.stem] = _Copy(path.stat().st_size, stale, path)

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(c.size for c in self._copies.values())

    def path(self, sha256: str) -> Path:
        """Where the copy of ``sha256`` is, or goes. A known copy's is one ``Path`` object:
        a request names it twice and keys a cache on it, and building and hashing a new one
        costs ~1 us each time."""
        copy = self._copies.get(sha256)
        return self.directory / f"{sha256}.pte" if copy is None else copy.path

    def ensure(self, sha256: str, write: Callable[[Path], None]) -> Path:
        """The local copy of ``sha256``, written with ``write(tmp_path)`` if missing."""
        target = self.path(sha256)
        with self._lock:
            if not target.exists():
                self._materialize(target, write)
            self._used(sha256, target)
            self._evict(keep=sha256)
        return target

    def local(self, sha256: str, source: ArtifactSource) -> Path:
        """The local copy of ``sha256``, marked used, materialised from ``source`` if
        missing. Workers are confined to reading this directory, so a file elsewhere is
        copied here too (a worker still checks its sha256 before loading it)."""
        if self.touch(sha256):
            return self.path(sha256)
        return self.ensure(sha256, writer_of(source))

    async def local_async(self, sha256: str, source: ArtifactSource) -> Path:
        """``local`` for an asyncio caller: a missing copy (evicted, or a corrupt one
        dropped) is fetched again in a thread."""
        if self.touch(sha256):
            return self.path(sha256)
        return await asyncio.to_thread(self.ensure, sha256, writer_of(source))

    def touch(self, sha256: str) -> bool:
        """Mark an existing copy used; False if there is none (call :meth:`ensure`)."""
        target = self.path(sha256)
        with self._lock:
            if not target.exists():
                self._copies.pop(sha256, None)
                return False
            self._used(sha256, target)
        return True

    def drop(self, sha256: str) -> None:
        """Delete a copy (e.g. it failed its sha256 check); the next use writes it again."""
        with self._lock:
            self._copies.pop(sha256, None)
            self.path(sha256).unlink(missing_ok=True)

    def _materialize(self, target: Path, write: Callable[[Path], None]) -> None:
        fd, tmp = tempfile.mkstemp(suffix=".part", dir=self.directory)
        os.close(fd)
        try:
            write(Path(tmp))
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _used(self, sha256: str, target: Path) -> None:
        copy = self._copies.get(sha256)
        if copy is None:
            copy = self._copies[sha256] = _Copy(target.stat().st_size, 0.0, target)
        copy.last_used = self._clock()
        self._copies.move_to_end(sha256)

    def _evict(self, keep: str) -> None:
        if self.capacity_bytes is None:
            return
        total = sum(c.size for c in self._copies.values())
        cutoff = self._clock() - self.grace_s
        for sha256, copy in list(self._copies.items()):
            if total <= self.capacity_bytes:
                return
            if sha256 == keep or copy.last_used > cutoff:
                continue
            self.path(sha256).unlink(missing_ok=True)
            del self._copies[sha256]
            total -= copy.size


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verified_path(sha256: str, path: str) -> Path:
    """``path`` as a Path once its content hashes to ``sha256``; raises otherwise."""
    local = Path(path)
    if not local.is_file():
        raise ArtifactIntegrityError(f"artifact file {path} does not exist")
    actual = file_sha256(local)
    if actual != sha256:
        raise ArtifactIntegrityError(
            f"artifact file {path} has sha256 {actual}, expected {sha256}; refusing to load it"
        )
    return local


@functools.lru_cache(maxsize=1024)
def writer_of(source: ArtifactSource) -> Callable[[Path], None]:
    """How to write ``source`` into a local copy: its own writer, or a copy of its file."""
    if not isinstance(source, Path):
        return source

    def copy(target: Path) -> None:
        shutil.copyfile(source, target)

    return copy
