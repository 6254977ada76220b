"""How a child process ended, classified once: a signal, out of memory, a timeout, a failure.

Each process manager turns a :class:`ChildDeath` into its own users' words (the sandbox's
``worker_*`` reasons, a compile job's ``out_of_memory`` or ``compile_crashed``), but what
counts as running out of memory, and which signal killed a child, is decided here.
"""

from __future__ import annotations

import errno
import resource
import signal
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pteforge.children.limits import PROC_STATUS, memory_figure

OOM_MARKERS = (
    "memoryerror",
    "bad_alloc",
    "failed to map segment",
    "cannot allocate memory",
    "out of memory",
)
"""What an allocation refused under RLIMIT_AS says, lowercased, depending on who allocated:
Python (``MemoryError``), C++ (``std::bad_alloc``), the dynamic loader (``failed to map
segment``), the C library (ENOMEM: ``Cannot allocate memory``) or a library's own words."""

CRASH_SIGNALS = frozenset(
    {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE}
)
"""The signals of a child that crashed by itself (rather than was killed)."""


class DeathReason(StrEnum):
    """The kinds of :class:`ChildDeath`."""

    SIGNAL = "signal"
    OUT_OF_MEMORY = "out_of_memory"
    TIMEOUT = "timeout"
    FAILED = "failed"


@dataclass(frozen=True)
class ChildDeath:
    """Why a child ended without its result: ``reason``, with the signal that killed it
    (``SIGNAL``) or the exit code it chose (``FAILED``, None if unknown)."""

    reason: DeathReason
    signum: int | None = None
    exit_code: int | None = None

    @property
    def signal_name(self) -> str:
        """The killing signal's name (``SIGKILL``), or its number if it has none."""
        if self.signum is None:
            return ""
        known = self.signum in signal.Signals._value2member_map_
        return signal.Signals(self.signum).name if known else str(self.signum)

    @property
    def crashed(self) -> bool:
        """Killed by a signal of its own doing (a segfault, an abort, ...)."""
        return self.signum is not None and self.signum in CRASH_SIGNALS

    @property
    def killed(self) -> bool:
        """Killed by SIGKILL: the kernel's OOM killer, the hard CPU limit, or a parent."""
        return self.signum == signal.SIGKILL


TIMED_OUT = ChildDeath(DeathReason.TIMEOUT)
"""A child that ran past its deadline (and was killed for it)."""


def death_from_exit(exit_code: int | None, output: str = "") -> ChildDeath:
    """How a child ended from its exit code (negative: the signal that killed it) and the
    tail of what it wrote (``output``), which tells an out-of-memory death from others."""
    if exit_code is not None and exit_code < 0:
        return ChildDeath(DeathReason.SIGNAL, signum=-exit_code)
    if looks_out_of_memory(output):
        return ChildDeath(DeathReason.OUT_OF_MEMORY, exit_code=exit_code)
    return ChildDeath(DeathReason.FAILED, exit_code=exit_code)


def death_from_exception(exc: BaseException) -> ChildDeath:
    """``OUT_OF_MEMORY`` if ``exc`` (or what caused it) is an allocation refused, else
    ``FAILED``."""
    if is_out_of_memory(exc):
        return ChildDeath(DeathReason.OUT_OF_MEMORY)
    return ChildDeath(DeathReason.FAILED)


def looks_out_of_memory(text: str) -> bool:
    """Whether ``text`` (an error message, a stderr tail) reports an allocation refused."""
    lowered = text.lower()
    return any(marker in lowered for marker in OOM_MARKERS)


def is_out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception in its cause chain, is an allocation refused.

    Under RLIMIT_AS that surfaces as ``MemoryError``, ENOMEM, a failed ``dlopen`` or a C++
    ``bad_alloc`` turned into ``RuntimeError``, depending on who allocated, or as a
    library's own error about something it could not build: so in a process with an
    address-space cap, any failure that came within reach of the cap counts too
    (:func:`reached_memory_limit`).
    """
    while exc is not None:
        if isinstance(exc, MemoryError) or getattr(exc, "errno", None) == errno.ENOMEM:
            return True
        if looks_out_of_memory(str(exc)):
            return True
        exc = exc.__cause__ or exc.__context__
    return reached_memory_limit(_address_space_cap())


def _address_space_cap() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def reached_memory_limit(limit_bytes: int | None, status: Path = PROC_STATUS) -> bool:
    """Whether this process's address space peaked within reach of ``limit_bytes`` (its
    RLIMIT_AS): the last 1/8 of it, at least 32 MiB.

    A refused allocation does not always surface as one of :data:`OOM_MARKERS`: a library
    may catch the ``MemoryError`` and raise its own error (CPython's AST builder reports
    ``field 'target' is required for AnnAssign`` when it could not allocate the node). A
    child that failed this close to its cap is taken to have run out of memory.
    """
    if not limit_bytes:
        return False
    try:
        peak = memory_figure("VmPeak", status)
    except (OSError, LookupError):
        return False
    return peak >= limit_bytes - max(limit_bytes // 8, 32 * 2**20)
