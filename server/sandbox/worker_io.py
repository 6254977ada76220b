"""The child side of :mod:`isolation`: run one job and answer with a single JSON line."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from .errors import UploadRejectedError


def worker_main(job: Callable[[list[str]], dict[str, Any]], failure_reason: str) -> None:
    """Run ``job(argv)``; library prints go to stderr, the reply alone to the real stdout."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # anything torch or a backend prints must not corrupt the reply
    try:
        reply: dict[str, Any] = {"ok": True, "result": job(sys.argv[1:])}
    except UploadRejectedError as e:
        reply = {"ok": False, "reason": e.reason, "message": e.message}
    except ImportError as e:  # the loader itself could not start: not the upload's fault
        reason = "worker_out_of_memory" if _looks_like_oom(str(e)) else "worker_failed"
        reply = {"ok": False, "reason": reason, "message": f"the loader could not start: {e}"}
    except MemoryError:
        reply = {
            "ok": False,
            "reason": "worker_out_of_memory",
            "message": "the loader ran out of memory",
        }
    except Exception as e:  # any third-party failure becomes a rejection with its text
        reply = {
            "ok": False,
            "reason": failure_reason,
            "message": f"{type(e).__name__}: {e}"[:2000],
        }
    with os.fdopen(reply_fd, "w") as out:
        out.write(json.dumps(reply) + "\n")
    # The reply is out; skip the interpreter's teardown of torch (most of a second), which
    # the caller would otherwise wait for. Nothing else of this process is needed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _looks_like_oom(text: str) -> bool:
    return "failed to map segment" in text or "Cannot allocate memory" in text
