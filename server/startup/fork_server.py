"""The server process's one fork server, shared by runtime workers and sandbox children.

``multiprocessing`` keeps a single fork server per process, and its preload list counts only
for whoever starts it first. The app starts it here, before anything forks, with the union
of what the runtime pool's workers and the sandbox's loader children import, so both fork
warm: a replaced runtime worker or an upload's loader starts in milliseconds.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext

from pteforge.runtime.processes import RUNTIME_PRELOAD
from pteforge.server.sandbox import SANDBOX_PRELOAD


def start_fork_server() -> ForkServerContext:
    """Start (once per process) the preloaded fork server; returns its context."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([*RUNTIME_PRELOAD, *SANDBOX_PRELOAD])
    forkserver.ensure_running()
    return ctx
