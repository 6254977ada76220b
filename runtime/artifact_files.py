"""Local copies of artifacts that workers load by path, bounded by bytes on disk.

Each artifact is written once as ``{sha256}.pte`` (through a temp file renamed into place)
and reused by every worker. An artifact whose constants are in a ``.ptd`` (ExecuTorch's
program-data separation) is one identity, :func:`program_identity` of both files' sha256:
its copies are ``{identity}.ptd`` (written first) and ``{identity}.pte`` beside it, so the
same ``.pte`` with another ``.ptd`` (a LoRA adapter over one foundation) is another program
to every cache keyed by identity. When the copies exceed ``capacity_bytes`` the least recently
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

# Where a file comes from: a local file, or a callable that writes it to the given path.
FileSource = Path | Callable[[Path], None]


@dataclass(frozen=True)
class WithData:
    """A ``.pte`` source and the source of the ``.ptd`` holding its constants."""

    program: FileSource
    data: FileSource


# Where an artifact comes from: its ``.pte``'s source, or that and its ``.ptd``'s.
ArtifactSource = FileSource | WithData


def program_identity(pte_sha256: str, data_sha256: str | None) -> str:
    """What caches key a program by: its ``.pte``'s sha256, or with a ``.ptd`` a digest of
    both (hex, like a sha256)."""
    if data_sha256 is None:
        return pte_sha256
    return hashlib.sha256(f"pte:{pte_sha256}\nptd:{data_sha256}".encode()).hexdigest()


def data_beside(path: Path) -> Path | None:
    """The ``.ptd`` copied beside the ``.pte`` at ``path``, if its program has one."""
    data = path.with_suffix(".ptd")
    return data if data.is_file() else None


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
            self._copies[path.stem] = _Copy(copy_size(path), stale, path)

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

    def ensure(
        self,
        sha256: str,
        write: Callable[[Path], None],
        write_data: Callable[[Path], None] | None = None,
    ) -> Path:
        """The local copy of ``sha256``, written with ``write(tmp_path)`` if missing (and
        first its ``.ptd`` with ``write_data``)."""
        target = self.path(sha256)
        with self._lock:
            if not target.exists():
                if write_data is not None:
                    self._materialize(target.with_suffix(".ptd"), write_data)
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
        return self.ensure(sha256, *writers_of(source))

    async def local_async(self, sha256: str, source: ArtifactSource) -> Path:
        """``local`` for an asyncio caller: a missing copy (evicted, or a corrupt one
        dropped) is fetched again in a thread."""
        if self.touch(sha256):
            return self.path(sha256)
        return await asyncio.to_thread(self.ensure, sha256, *writers_of(source))

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
            _unlink(self.path(sha256))

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
            copy = self._copies[sha256] = _Copy(copy_size(target), 0.0, target)
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
            _unlink(self.path(sha256))
            del self._copies[sha256]
            total -= copy.size


def copy_size(pte: Path) -> int:
    """The bytes a copy holds: its ``.pte``, and its ``.ptd`` if it has one."""
    data = data_beside(pte)
    return pte.stat().st_size + (0 if data is None else data.stat().st_size)


def _unlink(pte: Path) -> None:
    """Delete a copy: its ``.pte`` first, so a copy whose ``.pte`` exists is whole."""
    pte.unlink(missing_ok=True)
    pte.with_suffix(".ptd").unlink(missing_ok=True)


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verified_path(sha256: str, path: str) -> Path:
    """``path`` as a Path once its content hashes to ``sha256``; raises otherwise. A
    ``.pte`` with a ``.ptd`` beside it is checked as the pair: ``sha256`` is then their
    :func:`program_identity`."""
    local = Path(path)
    if not local.is_file():
        raise ArtifactIntegrityError(f"artifact file {path} does not exist")
    data = data_beside(local) if local.suffix == ".pte" else None
    actual = program_identity(file_sha256(local), None if data is None else file_sha256(data))
    if actual != sha256:
        raise ArtifactIntegrityError(
            f"artifact file {path} has sha256 {actual}, expected {sha256}; refusing to load it"
        )
    return local


def writers_of(
    source: ArtifactSource,
) -> tuple[Callable[[Path], None], Callable[[Path], None] | None]:
    """How to write the ``.pte`` of ``source``, and its ``.ptd`` if it has one."""
    if isinstance(source, WithData):
        return writer_of(source.program), writer_of(source.data)
    return writer_of(source), None


@functools.lru_cache(maxsize=1024)
def writer_of(source: FileSource) -> Callable[[Path], None]:
    """How to write ``source`` into a local copy: its own writer, or a copy of its file."""
    if not isinstance(source, Path):
        return source

    def copy(target: Path) -> None:
        shutil.copyfile(source, target)

    return copy
