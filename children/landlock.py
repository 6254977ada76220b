"""Landlock: what a confined child may read and write, enforced by the kernel.

A child that touches uploaded content restricts itself, before it reads the upload, to
reading the system and Python installation plus the paths it was given, and to writing its
scratch directory alone. It may execute no file (``execve`` is refused everywhere), bind or
connect no TCP port, signal no process outside its own domain, and reach no abstract Unix
socket. Landlock is unprivileged and stacks with the other layers of
:mod:`pteforge.children.confine`; it also keeps a confined process from ptracing (and so
from reading ``/proc/PID/environ`` or ``/proc/PID/mem`` of) any process outside its domain.

Standard library only (``ctypes``): the syscall numbers are those of the generic table,
the same on x86-64 and arm64.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights by the ABI version that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_MAKE_AND_REMOVE = sum(1 << bit for bit in range(4, 13))  # remove dir/file, make char..sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_BY_ABI = {1: EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | _MAKE_AND_REMOVE, 2: _REFER}
_FS_BY_ABI |= {3: _TRUNCATE, 5: _IOCTL_DEV}
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect (ABI 4)
_SCOPES = (1 << 0) | (1 << 1)  # abstract Unix sockets, signals (ABI 6)

READ = READ_FILE | READ_DIR
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | _TRUNCATE | _IOCTL_DEV


class LandlockError(OSError):
    """Landlock is missing here, or refused the ruleset."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(*args: object) -> int:
    result = int(_libc.syscall(*args))
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, os.strerror(errno))
    return result


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 when it has none (or it is disabled)."""
    try:
        return _syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_CREATE_RULESET_VERSION))  # fmt: skip
    except LandlockError:
        return 0


def handled_fs(abi: int) -> int:
    """Every filesystem right that ABI ``abi`` knows (all of them are denied unless granted)."""
    return sum(rights for version, rights in _FS_BY_ABI.items() if version <= abi)


def restrict_self(read: Iterable[Path], write: Iterable[Path], execute: Iterable[Path] = ()) -> int:
    """Confine this process (and its future threads and children) for good: read ``read``
    and ``write``, write, create and remove beneath ``write`` only, execute only the files
    ``execute``; returns the ABI used.

    Paths that do not exist are skipped. Raises :class:`LandlockError` when the kernel has
    no Landlock. Call it before any other thread starts: threads that already run keep
    their freedom.
    """
    abi = abi_version()
    if abi < 1:
        raise LandlockError("Landlock is not available in this kernel")
    fs = handled_fs(abi)
    attr = _RulesetAttr(fs, _NET_TCP if abi >= 4 else 0, _SCOPES if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                       ctypes.c_uint32(0))  # fmt: skip
    try:
        for path in read:
            _allow(ruleset, path, READ)
        for path in write:
            _allow(ruleset, path, fs & ~EXECUTE)
        for path in execute:
            _allow(ruleset, path, READ_FILE | EXECUTE)
        set_no_new_privs()
        _syscall(ctypes.c_long(_RESTRICT_SELF), ruleset, ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return abi


def set_no_new_privs() -> None:
    """No ``execve`` of this process or its children can gain privileges (set-uid bits,
    file capabilities); required before an unprivileged process may restrict itself."""
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(errno)}")


def _allow(ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        _syscall(ctypes.c_long(_ADD_RULE), ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                 ctypes.c_uint32(0))  # fmt: skip
    finally:
        os.close(fd)
