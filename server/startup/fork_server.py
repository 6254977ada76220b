"""The server process's one fork server, shared by runtime workers and sandbox children.

``multiprocessing`` keeps a single fork server per process, and its preload list counts only
for whoever starts it first. The app starts it here, before anything forks, with the union
of what the runtime pool's workers and the sandbox's loader children import, so both fork
warm: a replaced runtime worker or an upload's loader starts in milliseconds.
"""

from __future__ import annotations

from multiprocessing.context import ForkServerContext

from pteforge.children import forkserver


def start_fork_server() -> ForkServerContext:
    """Start (once per process) the preloaded fork server; returns its context."""
    return forkserver.start_fork_server(
        forkserver.RUNTIME_WORKER_PRELOAD, forkserver.SANDBOX_PRELOAD
    )
