"""Who a confined child is: on a root host, the dedicated unprivileged uid
:data:`SANDBOX_UID`, holding one capability (see :func:`become_sandbox_user`). Raises
``OSError``; :func:`pteforge.children.confine.confine` turns that into its refusal."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_PR_CAPBSET_DROP, _PR_SET_KEEPCAPS, _PR_CAP_AMBIENT = 24, 8, 47
_AMBIENT_RAISE, _AMBIENT_CLEAR_ALL = 2, 4
_CAPABILITY_VERSION_3 = 0x20080522
_CAP_DAC_READ_SEARCH = 2

SANDBOX_UID = SANDBOX_GID = 64999
"""The dedicated uid and gid the children of a root service run as: no account, no file
outside a child's scratch directory, no process of the service."""

_libc = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


def become_sandbox_user(scratch: Path) -> int:
    """Run as :data:`SANDBOX_UID`, which owns ``scratch`` from now on, with no capability
    but ``CAP_DAC_READ_SEARCH`` (in every set, the bounding set included).

    That one is kept because what a child must read is root's, mode 0600 or 0700: the
    Python installation may live under ``/root``, and the job's files are written by the
    service. Which paths it reads is Landlock's to say; it writes nothing it does not own.
    It is ambient too, so ``flatc`` (the one program a child may start) reads the same.
    """
    os.chown(scratch, SANDBOX_UID, SANDBOX_GID)
    _prctl(_PR_SET_KEEPCAPS, 1)  # the permitted set survives setresuid
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        if cap != _CAP_DAC_READ_SEARCH:
            _prctl(_PR_CAPBSET_DROP, cap)
    _prctl(_PR_CAP_AMBIENT, _AMBIENT_CLEAR_ALL)
    os.setgroups([])
    os.setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID)
    os.setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
    _set_capabilities(1 << _CAP_DAC_READ_SEARCH)
    _prctl(_PR_CAP_AMBIENT, _AMBIENT_RAISE, _CAP_DAC_READ_SEARCH)
    _prctl(_PR_SET_KEEPCAPS, 0)
    os.environ.update(USER="pteforge-sandbox", LOGNAME="pteforge-sandbox")  # no passwd entry
    return SANDBOX_UID


def _prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    if _libc.prctl(option, arg, arg3, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl({option}, {arg}, {arg3}): {os.strerror(code)}")


def _set_capabilities(kept: int) -> None:
    """Effective, permitted and inheritable sets = ``kept`` (capabilities 0-31)."""
    data = (ctypes.c_uint32 * 6)(kept, kept, kept, 0, 0, 0)  # two __user_cap_data_struct
    if _libc.capset(ctypes.byref(_CapHeader(_CAPABILITY_VERSION_3, 0)), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset could not drop capabilities: {os.strerror(code)}")


def hand_to_children(directory: Path) -> None:
    """Give ``directory``, made by this (root) service inside a child's scratch directory,
    to :data:`SANDBOX_UID`, so the confined child may write there too."""
    if os.geteuid() == 0:
        os.chown(directory, SANDBOX_UID, SANDBOX_GID)
