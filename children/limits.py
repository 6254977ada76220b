"""What a child process applies to itself before it touches untrusted input.

The resource limits (:class:`ChildLimits`, :func:`apply_limits`), the minimal environment
(:func:`child_env`) and the signal handling (:func:`take_default_signals`) of every sandboxed
child, written once. Standard library only: the sandbox's launcher imports this before any
other package, so the limits hold from its first import on.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CPU_HARD_GRACE_SECONDS = 5
"""Between the soft CPU limit (SIGXCPU, which a child may report) and the hard one
(SIGKILL)."""

WEIGHTS_ONLY_ENV = {"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1"}
"""What every process that may read an untrusted program runs with: ``torch.load`` never
unpickles arbitrary objects."""

PROC_STATUS = Path("/proc/self/status")


def memory_figure(field: str, status: Path = PROC_STATUS) -> int:
    """A memory figure of this process in bytes, from Linux's ``status`` file: ``VmRSS``
    (resident now), ``VmHWM`` (resident peak), ``VmPeak`` (address-space peak, what
    RLIMIT_AS bounds)... Raises ``OSError`` if the file cannot be read, ``LookupError`` if
    it has no ``field``."""
    for line in status.read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024  # the kernel writes kB
    raise LookupError(f"{field} not found in {status}")


def reset_memory_peak() -> bool:
    """Make ``VmHWM`` this process's current resident set (Linux 4.0+, through
    ``/proc/self/clear_refs``); False where refused (a confined process may not write
    ``/proc``)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


FP32_CPU_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"}
"""oneDNN may not use bf16 instructions (AVX512_BF16, AMX), so OpenVINO's CPU plugin runs
fp32 methods in fp32: upstream's runtime imports a compiled OpenVINO method with no
properties (a precision hint given at compile time is lost), and on a CPU with bf16 the
plugin then picks bf16 (an MLP 2e-3 off eager). XNNPACK and the portable kernels do not use
oneDNN. Every process that runs such a method starts with it: sandboxed children, and the
command line (``setdefault``: an operator's own value stands)."""

_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH")
_CHILD_ENV = {
    **WEIGHTS_ONLY_ENV,
    **FP32_CPU_ENV,
    "MALLOC_ARENA_MAX": "2",
    "OMP_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


@dataclass(frozen=True)
class ChildLimits:
    """Resource bounds a child applies to itself; None leaves that resource unbounded.

    Core dumps are always off: a crashing child must not write its memory (an upload's
    contents, the server's state it inherited) to disk.
    """

    memory_bytes: int | None = None
    cpu_seconds: int | None = None


def apply_limits(limits: ChildLimits) -> None:
    """Cap this process's address space and CPU time as ``limits`` say; no core dumps.

    Past ``cpu_seconds`` the child gets SIGXCPU, and SIGKILL
    :data:`CPU_HARD_GRACE_SECONDS` later; past ``memory_bytes`` its allocations fail
    (``MemoryError``, ENOMEM, ``std::bad_alloc``: see :mod:`~pteforge.children.death`).
    """
    if limits.memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    if limits.cpu_seconds:
        hard = limits.cpu_seconds + CPU_HARD_GRACE_SECONDS
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The minimal environment of a sandboxed child: no server secrets (nothing of
    ``PTEFORGE_*``), weights-only ``torch.load``, one OpenMP thread, few malloc arenas."""
    env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
    env.update(_CHILD_ENV)
    env.update(extra or {})
    return env


def take_default_signals() -> None:
    """SIGTERM and SIGINT kill the child again (a forked child inherits its parent's
    handlers, which would keep it alive)."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)


@contextmanager
def address_space_budget(extra_bytes: int) -> Iterator[None]:
    """Within the block, this process may grow its address space by ``extra_bytes`` at most:
    past that its allocations fail (``MemoryError``) instead of taking the host's memory.
    For a bounded step of a long-lived process (a runtime worker rendering an uploaded chat
    template); the soft ``RLIMIT_AS`` is lowered for the block and restored after, and
    other threads of the process are held to it meanwhile."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_figure("VmSize") + extra_bytes
    for bound in (soft, hard):
        if bound != resource.RLIM_INFINITY:
            limit = min(limit, bound)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextmanager
def wall_clock_deadline(seconds: float, expired: Callable[[], BaseException]) -> Iterator[None]:
    """Within the block, ``expired()`` is raised where the block's Python code is once
    ``seconds`` have passed (SIGALRM: on the main thread only; elsewhere no deadline). C code
    is not interrupted: the error comes when it returns to Python."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise expired()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
