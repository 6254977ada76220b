"""What the native runtime logs during one request, so that request's error can say it.

ExecuTorch writes why it failed to stderr (``ET_LOG``: ``[op_embedding.cpp:43] Check
failed ...: indices_ptr[1] 99 >= weight.size(0) 32``) and hands Python only an error code.
A runtime worker serves one request at a time, so it points its fd 2 at a file in its
scratch directory (``NativeLog``) and takes what was written between a request's start and
its end; what is written between requests belongs to none and is only forwarded. Everything
taken is also copied to the worker's original stderr, so the server's log keeps it; what a
worker wrote just before it died, the pool forwards when it removes the worker
(``leftover``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LOG_FILE = "native.log"
"""The name of the captured stderr in a worker's scratch directory."""

MAX_LEFTOVER_BYTES = 64 * 1024
"""The most bytes of a dead worker's last log that are forwarded (its tail)."""


class NativeLog:
    """Captures what is written to file descriptor ``fd`` (the process's stderr) in the
    file at ``path``."""

    def __init__(self, path: Path, fd: int = 2) -> None:
        self._fd = fd
        self._original = os.dup(fd)
        # O_APPEND: once truncated, the next write lands at offset 0 again.
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC
        self._file = os.open(path, flags, 0o600)
        os.dup2(self._file, fd)

    def take(self) -> str:
        """What was written since the last ``take`` (decoded, lossless for UTF-8), after
        copying it to the original stderr."""
        if self._fd == 2:
            sys.stderr.flush()
        size = os.fstat(self._file).st_size
        if not size:
            return ""
        data = os.pread(self._file, size, 0)
        os.ftruncate(self._file, 0)
        _write_all(self._original, data)
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        """Point ``fd`` back at the original stderr, forwarding what is left."""
        self.take()
        os.dup2(self._original, self._fd)
        os.close(self._file)
        os.close(self._original)


def leftover(scratch: Path) -> str:
    """What the worker with scratch directory ``scratch`` wrote to stderr and never took
    (it died first): at most the last ``MAX_LEFTOVER_BYTES``."""
    try:
        with (scratch / LOG_FILE).open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - MAX_LEFTOVER_BYTES))
            return fh.read().decode("utf-8", "replace")
    except FileNotFoundError:  # it died before it started capturing
        return ""


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the server's stderr is gone: the request's answer still carries the lines


__all__ = ["LOG_FILE", "MAX_LEFTOVER_BYTES", "NativeLog", "leftover"]
