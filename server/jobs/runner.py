"""Runs one lowering process for a claimed job and watches it.

The worker thread that calls :func:`run_lowering` heartbeats the job's lease every tick,
forwards stage messages to storage, and kills the process on cancel, lease loss, timeout
or worker shutdown. A process that dies without a result (crash, SIGKILL by the kernel's
OOM killer, RLIMIT_AS) becomes a clear failure of this job only.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pteforge.server.jobs.protocol import LoweringOutcome, LoweringRequest


class Verdict:
    """What the watch loop decided from one heartbeat."""

    CONTINUE = "continue"
    CANCEL = "cancel"
    ABANDON = "abandon"  # lease lost or worker stopping: someone else owns the job now


@dataclass
class Watch:
    """Callbacks and limits of one lowering run."""

    tick_seconds: float
    timeout_seconds: float
    heartbeat: Callable[[], str]  # returns a Verdict
    on_stage: Callable[[str], None]


def _spawn(request: LoweringRequest) -> tuple[subprocess.Popen[bytes], int]:
    read_fd, write_fd = os.pipe()
    env = dict(os.environ, TORCH_FORCE_WEIGHTS_ONLY_LOAD="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pteforge.server.jobs.lowering", str(write_fd)],
        stdin=subprocess.PIPE,
        pass_fds=(write_fd,),
        env=env,
        start_new_session=True,
    )
    os.close(write_fd)
    assert proc.stdin is not None
    proc.stdin.write(request.to_json().encode())
    proc.stdin.close()
    return proc, read_fd


def _reap(proc: subprocess.Popen[bytes], grace_seconds: float) -> None:
    """Wait up to ``grace_seconds`` for the process, then kill its whole group."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_seconds)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _died_message(returncode: int) -> tuple[str, str]:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = " (likely out of memory)" if -returncode == signal.SIGKILL else ""
        return "compile_crashed", f"the lowering process died with {name}{hint}"
    return "compile_crashed", f"the lowering process exited with code {returncode} and no result"


def _apply(message: dict[str, Any], outcome: LoweringOutcome, watch: Watch) -> None:
    if "stage" in message:
        outcome.stages.append(str(message["stage"]))
        watch.on_stage(str(message["stage"]))
    elif "result" in message:
        outcome.result = message["result"]
    elif "error" in message:
        outcome.error_code = str(message["error"]["code"])
        outcome.error_message = str(message["error"]["message"])


def run_lowering(request: LoweringRequest, watch: Watch) -> tuple[LoweringOutcome, str]:
    """Run ``request`` in a fresh process; returns the outcome and the final Verdict."""
    proc, fd = _spawn(request)
    outcome, buffer, grace = LoweringOutcome(), b"", 0.0
    deadline = time.monotonic() + watch.timeout_seconds
    next_beat = time.monotonic() + watch.tick_seconds
    try:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while True:
                ready, _, _ = select.select([pipe], [], [], watch.tick_seconds)
                if ready:
                    chunk = pipe.read(65536)
                    if not chunk:  # the process closed the pipe: it finished or died
                        grace = 10.0
                        break
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        _apply(json.loads(line), outcome, watch)
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + watch.tick_seconds
                    verdict = watch.heartbeat()
                    if verdict != Verdict.CONTINUE:
                        return outcome, verdict
                if time.monotonic() > deadline:
                    outcome.error_code = "timeout"
                    outcome.error_message = f"lowering took over {watch.timeout_seconds:.0f}s"
                    return outcome, Verdict.CONTINUE
    finally:
        _reap(proc, grace)
    if outcome.result is None and outcome.error_code is None:
        outcome.error_code, outcome.error_message = _died_message(proc.returncode)
    return outcome, Verdict.CONTINUE
