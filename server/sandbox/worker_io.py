"""The child side of the isolation boundary: run one job and answer with a single JSON object.

A worker module defines ``JOB = WorkerJob(run, failure_reason)``; ``run`` returns a typed
result (a :class:`~pteforge.contracts.specs.JsonForm`, e.g. a
:class:`~pteforge.server.sandbox.specs.ProgramDescription`) that the parent validates back
with :func:`~pteforge.server.sandbox.isolation.read_result`. Started as a script
(:mod:`isolation`) it calls :func:`worker_main`; forked from the server's fork server
(:mod:`forked`) the child calls :func:`reply_for` directly. The answer is a
:class:`~pteforge.children.reply.ChildReply`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from pteforge.children.death import DeathReason, death_from_exception
from pteforge.children.reply import ChildReply
from pteforge.contracts.specs import JsonForm

from .errors import UploadRejectedError

_OUT_OF_MEMORY = ChildReply.refused("worker_out_of_memory", "the loader ran out of memory")


@dataclass(frozen=True)
class WorkerJob:
    """What a worker module does with its arguments, and the rejection reason of its failures."""

    run: Callable[[list[str]], JsonForm]
    failure_reason: str


def reply_for(job: WorkerJob, argv: list[str]) -> ChildReply:
    """Run ``job`` and turn its result or failure into the reply."""
    try:
        return ChildReply.done(job.run(argv).to_json())
    except UploadRejectedError as e:
        return ChildReply.refused(e.reason, e.message)
    except ImportError as e:  # the loader itself could not start: not the upload's fault
        oom = death_from_exception(e).reason is DeathReason.OUT_OF_MEMORY
        reason = "worker_out_of_memory" if oom else "worker_failed"
        return ChildReply.refused(reason, f"the loader could not start: {e}")
    except MemoryError:
        return _OUT_OF_MEMORY
    except Exception as e:  # any third-party failure becomes a rejection with its text
        return ChildReply.refused(job.failure_reason, f"{type(e).__name__}: {e}"[:2000])


def worker_main(job: WorkerJob) -> None:
    """Run ``job`` on ``sys.argv``; library prints go to stderr, the reply alone to stdout."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # anything torch or a backend prints must not corrupt the reply
    reply = reply_for(job, sys.argv[1:])
    with os.fdopen(reply_fd, "wb") as out:
        out.write(reply.to_bytes() + b"\n")
    # The reply is out; skip the interpreter's teardown of torch (most of a second), which
    # the caller would otherwise wait for. Nothing else of this process is needed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
