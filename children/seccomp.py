"""seccomp: the system calls a confined child may not make at all.

The filter refuses (``EPERM``) what a child that lowers, verifies or runs a program never
needs and an escaping payload would: opening network sockets and connecting anywhere (the
child talks to its parent over a socketpair or pipe it was born with), executing programs,
tracing or reading other processes, namespaces and mounts, kernel modules, BPF, keyrings,
io_uring and the clock. ``clone`` with a namespace flag is refused; ``clone3`` answers
``ENOSYS`` so the C library falls back to ``clone``, whose flags the filter can see. The
filter applies to every thread of the process (``SECCOMP_FILTER_FLAG_TSYNC``) and to all
its children, and cannot be lifted.

Standard library only (``ctypes``); x86-64 and arm64. A call of another architecture's
ABI (x32, i386 on x86-64) kills the process.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

_X86_ONLY = {"iopl": 172, "ioperm": 173, "modify_ldt": 154}
_NUMBERS = {  # name: (x86-64, arm64)
    "socket": (41, 198), "connect": (42, 203), "bind": (49, 200), "listen": (50, 201),
    "accept": (43, 202), "accept4": (288, 242), "execve": (59, 221), "execveat": (322, 281),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "unshare": (272, 97), "setns": (308, 268), "mount_setattr": (442, 442),
    "move_mount": (429, 429), "open_tree": (428, 428), "fsopen": (430, 430),
    "fsmount": (432, 432), "fsconfig": (431, 431), "fspick": (433, 433), "bpf": (321, 280),
    "perf_event_open": (298, 241), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "init_module": (175, 105), "finit_module": (313, 273),
    "delete_module": (176, 106), "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "reboot": (169, 142), "swapon": (167, 224), "swapoff": (168, 225),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427), "userfaultfd": (323, 282),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "fanotify_init": (300, 262), "quotactl": (179, 60), "acct": (163, 89),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "adjtimex": (159, 171),
    "clock_adjtime": (305, 266), "sethostname": (170, 161), "setdomainname": (171, 162),
}  # fmt: skip
"""Every call refused outright (``EPERM``), by its number on x86-64 and on arm64."""
_CLONE, _CLONE3, _SECCOMP = (56, 220), (435, 435), (317, 277)
_ARCH = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}  # AUDIT_ARCH_*, column
_X32_BIT = 0x40000000
_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

# BPF opcodes and seccomp return values
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_PR_SET_NO_NEW_PRIVS, _SET_MODE_FILTER, _FLAG_TSYNC = 38, 1, 1


class SeccompError(OSError):
    """seccomp is missing here, or refused the filter."""


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def build_filter(machine: str, allow_execve: bool = False) -> bytes:
    """The BPF program, as bytes of ``struct sock_filter``, for ``machine`` (``uname -m``);
    ``allow_execve`` lets ``execve`` through (Landlock then decides which files may run)."""
    if machine not in _ARCH:
        raise SeccompError(f"no seccomp filter for {machine}")
    arch, column = _ARCH[machine]
    denied = [
        numbers[column]
        for name, numbers in _NUMBERS.items()
        if not (allow_execve and name == "execve")
    ]
    if column == 0:
        denied += list(_X86_ONLY.values())
    clone, clone3 = _CLONE[column], _CLONE3[column]
    head = [_insn(_LD_ABS, 0, 0, 4), _insn(_JEQ, 1, 0, arch), _insn(_RET, 0, 0, _KILL)]
    head.append(_insn(_LD_ABS, 0, 0, 0))  # the syscall number
    if column == 0:
        head.append(_insn(_JGE, 0, 1, _X32_BIT))
        head.append(_insn(_RET, 0, 0, _KILL))
    tail = [
        _insn(_JEQ, 0, 1, clone3),
        _insn(_RET, 0, 0, _ERRNO | errno.ENOSYS),
        _insn(_JEQ, 0, 3, clone),
        _insn(_LD_ABS, 0, 0, 16),  # clone's flags (low 32 bits of args[0])
        _insn(_JSET, 2, 0, _NAMESPACE_FLAGS),  # a namespace flag: to the refusal
        _insn(_RET, 0, 0, _ALLOW),
        _insn(_RET, 0, 0, _ALLOW),  # not clone: allowed
        _insn(_RET, 0, 0, _ERRNO | errno.EPERM),  # every refused call jumps here
    ]
    deny_at = len(denied) + len(tail) - 1  # index of the last instruction, from the first check
    checks = [_insn(_JEQ, deny_at - i - 1, 0, nr) for i, nr in enumerate(denied)]
    return b"".join(head + checks + tail)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def install_filter(allow_execve: bool = False) -> None:
    """Load the filter into this process, all its threads and its future children, for good."""
    machine = os.uname().machine
    program = build_filter(machine, allow_execve)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    prog = _SockFprog(len(program) // 8, program)
    nr = _SECCOMP[_ARCH[machine][1]]
    result = libc.syscall(nr, _SET_MODE_FILTER, _FLAG_TSYNC, ctypes.byref(prog))
    if result != 0:
        code = ctypes.get_errno()
        raise SeccompError(code, f"seccomp(SET_MODE_FILTER): {os.strerror(code) or result}")


def available() -> bool:
    """Whether this kernel filters system calls (``Seccomp:`` in ``/proc/self/status``)."""
    try:
        with open("/proc/self/status") as status:
            return any(line.startswith("Seccomp:") for line in status)
    except OSError:
        return False
