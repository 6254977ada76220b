"""The child side of the isolation boundary: run one job and answer with a single JSON object.

A worker module defines ``JOB = WorkerJob(run, failure_reason)``. Started as a script
(:mod:`isolation`) it calls :func:`worker_main`; forked from the server's fork server
(:mod:`forked`) the child calls :func:`reply_for` directly.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import UploadRejectedError


@dataclass(frozen=True)
class WorkerJob:
    """What a worker module does with its arguments, and the rejection reason of its failures."""

    run: Callable[[list[str]], dict[str, Any]]
    failure_reason: str


def reply_for(job: WorkerJob, argv: list[str]) -> dict[str, Any]:
    """Run ``job`` and turn its result or failure into the reply object."""
    try:
        return {"ok": True, "result": job.run(argv)}
    except UploadRejectedError as e:
        return {"ok": False, "reason": e.reason, "message": e.message}
    except ImportError as e:  # the loader itself could not start: not the upload's fault
        reason = "worker_out_of_memory" if _looks_like_oom(str(e)) else "worker_failed"
        return {"ok": False, "reason": reason, "message": f"the loader could not start: {e}"}
    except MemoryError:
        return {
            "ok": False,
            "reason": "worker_out_of_memory",
            "message": "the loader ran out of memory",
        }
    except Exception as e:  # any third-party failure becomes a rejection with its text
        return {
            "ok": False,
            "reason": job.failure_reason,
            "message": f"{type(e).__name__}: {e}"[:2000],
        }


def worker_main(job: WorkerJob) -> None:
    """Run ``job`` on ``sys.argv``; library prints go to stderr, the reply alone to stdout."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # anything torch or a backend prints must not corrupt the reply
    reply = reply_for(job, sys.argv[1:])
    with os.fdopen(reply_fd, "w") as out:
        out.write(json.dumps(reply) + "\n")
    # The reply is out; skip the interpreter's teardown of torch (most of a second), which
    # the caller would otherwise wait for. Nothing else of this process is needed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _looks_like_oom(text: str) -> bool:
    return "failed to map segment" in text or "Cannot allocate memory" in text
