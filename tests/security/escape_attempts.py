"""Run as a script: confine this process with some layers, then try to escape each way.

``python escape_attempts.py LAYERS SCRATCH GRANTED SECRET LOCKED PORT`` applies the layers
named in ``LAYERS`` (comma-separated: ``landlock``, ``seccomp``, ``netns``, ``uid``,
``all`` for :func:`pteforge.children.confine.confine`, ``worker`` for it with a runtime
worker's own ``Confinement``, ``none``), then prints one JSON
object: for each attempt, ``"ok"`` or the errno name that stopped it. The attempts are what
code smuggled into a child would try first: write outside its scratch directory, read the
database, connect to a TCP port, start a shell or ExecuTorch's ``flatc``, signal or read the
environment of its parent, leave its namespaces, read a file only root's capabilities open.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def _apply(layers: set[str], scratch: Path, granted: Path) -> None:
    from pteforge.children import confine as c
    from pteforge.children import identity, landlock, seccomp

    if "all" in layers:
        c.confine(c.Confinement(scratch, (granted,)))
        return
    if "worker" in layers:
        from pteforge.runtime.worker import WorkerConfig

        c.confine(WorkerConfig(1 << 20, readable=(str(granted),)).confinement(str(scratch)))
        return
    if "netns" in layers:
        assert ctypes.CDLL(None, use_errno=True).unshare(0x40000000) == 0
    if "uid" in layers:
        identity.become_sandbox_user(scratch)
    if "landlock" in layers:
        read = (*c.SYSTEM_READ, *c.python_read_roots(), granted)
        landlock.restrict_self(read, (scratch,))
    if "seccomp" in layers:
        seccomp.install_filter()


def _attempts(
    scratch: Path, granted: Path, secret: Path, locked: Path, port: int
) -> dict[str, Callable[[], object]]:
    from pteforge.children.confine import flatc as flatc_files

    libc, flatc = ctypes.CDLL(None, use_errno=True), str(flatc_files()[0])

    def raising(result: int) -> None:
        if result != 0:
            raise OSError(ctypes.get_errno(), "")

    return {
        "write_scratch": lambda: (scratch / "ok").write_text("x"),
        "read_granted": lambda: granted.read_bytes(),
        "write_outside": lambda: (secret.parent / "planted").write_text("x"),
        "read_database": lambda: secret.read_bytes(),
        "read_root_only_file": lambda: locked.read_bytes(),
        "tcp_connect": lambda: socket.create_connection(("127.0.0.1", port), timeout=2).close(),
        "exec_shell": lambda: subprocess.run(["/bin/sh", "-c", "true"], check=True),
        "exec_flatc": lambda: subprocess.run([flatc, "--version"], check=True, capture_output=True),
        "signal_parent": lambda: os.kill(os.getppid(), 0),
        "parent_environ": lambda: Path(f"/proc/{os.getppid()}/environ").read_bytes(),
        "new_namespace": lambda: raising(libc.unshare(0x00020000)),  # CLONE_NEWNS
    }


def main() -> None:
    layers, scratch, granted, secret, locked, port = sys.argv[1:7]
    _apply(set(layers.split(",")), Path(scratch), Path(granted))
    results: dict[str, str] = {}
    for name, attempt in _attempts(
        Path(scratch), Path(granted), Path(secret), Path(locked), int(port)
    ).items():
        try:
            attempt()
            results[name] = "ok"
        except OSError as exc:
            results[name] = errno.errorcode.get(exc.errno or 0, str(exc))
        except subprocess.CalledProcessError as exc:
            results[name] = f"exit {exc.returncode}"
    print(json.dumps(results))


if __name__ == "__main__":
    main()
