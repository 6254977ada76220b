"""Each compile worker's own scratch directory under ``$PTEFORGE_HOME/work``, which cannot leak.

A worker holds an exclusive ``flock`` on its directory for as long as it lives, and the
kernel drops the lock when the process ends however it ends (SIGKILL included). So a
directory under ``work/`` whose lock can be taken has no owner left: :func:`sweep` removes it
with whatever a killed job left there (the program copy, a half-written ``.pte``). Workers
sweep when they start and at each garbage collection, which covers several workers sharing
one home, a restarted server and a worker killed mid-job. A live worker's directory is
locked and never touched.

The lock is taken on the directory itself, so there is no window in which a directory
exists without its lock file: a sweeper that locks a directory removes it while holding the
lock, and an owner that locked its fresh directory checks that it is still there.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

_PREFIX = "worker-"
_CLAIM_TRIES = 100  # each failure means a sweeper removed our fresh directory: try again


class WorkerScratch:
    """A directory under a root owned (locked) by this process until :meth:`close`."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def claim(cls, root: Path) -> WorkerScratch:
        """Create and lock a new directory of this process under ``root``."""
        root.mkdir(parents=True, exist_ok=True)
        for _ in range(_CLAIM_TRIES):
            path = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=root))
            fd = _lock(path)
            if fd is not None:
                return cls(path, fd)
        raise OSError(errno.EBUSY, f"could not claim a scratch directory under {root}")

    def close(self) -> None:
        """Remove the directory and drop its lock (the worker is stopping)."""
        if self._fd is None:
            return
        try:
            shutil.rmtree(self.path)
        finally:
            os.close(self._fd)
            self._fd = None


def sweep(root: Path) -> list[Path]:
    """Remove every directory under ``root`` whose owner is gone (its lock can be taken);
    returns them. Directories that cannot be removed are logged and left for the next
    sweep."""
    try:
        entries = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []
    removed = []
    for entry in entries:
        path = Path(entry.path)
        try:
            if _remove_unowned(path):
                removed.append(path)
        except OSError as exc:
            log.warning("could not remove the leftover scratch directory %s: %s", path, exc)
    return removed


def _remove_unowned(path: Path) -> bool:
    fd = _lock(path)
    if fd is None:
        return False
    try:
        shutil.rmtree(path)
    finally:
        os.close(fd)
    return True


def _lock(path: Path) -> int | None:
    """A descriptor holding ``path``'s exclusive lock, or None when another process holds
    it or ``path`` is gone (or is no longer the directory that was locked)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        locked = os.path.samestat(os.fstat(fd), os.stat(path))
    except (BlockingIOError, FileNotFoundError):  # a live owner, or just removed by another
        locked = False
    except BaseException:
        os.close(fd)
        raise
    if not locked:
        os.close(fd)
        return None
    return fd
