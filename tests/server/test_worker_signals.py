"""A compile worker's signals (wake-up, cancel, stop) under a flood, in a real process.

The server sends SIGUSR1 to its workers for every queued job. A Python signal handler that
set the worker's wake-up Event could run while the main thread held that Event's lock (in
``clear()``) and wait for itself forever: a CI run saw a job queued right after the
previous one finished never claimed. The worker now handles its signals on a thread.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

_PROCESS = textwrap.dedent(
    """
    import signal, sys, threading, time
    from pteforge.server.jobs.compile_workers import handle_signals_on_a_thread

    wake, stop = threading.Event(), threading.Event()
    handle_signals_on_a_thread({signal.SIGUSR1: wake.set, signal.SIGTERM: stop.set})
    print("ready", flush=True)
    rounds = 0
    while not stop.is_set():  # what the worker's claim loop does with its wake-up event
        wake.clear()
        rounds += 1
        if rounds % 20000 == 0:
            print(rounds, flush=True)
    print("stopped", flush=True)
    """
)


def _flood(pid: int, seconds: float) -> int:
    sent, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        os.kill(pid, signal.SIGUSR1)
        sent += 1
        time.sleep(0.0002)
    return sent


def test_a_flood_of_wake_ups_never_stops_the_main_loop() -> None:
    """With the old handler this process wedged (or died of nested handlers) within a
    second of flooding; here it keeps looping, then stops on SIGTERM."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _PROCESS], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        sent = _flood(proc.pid, 3.0)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert out.splitlines()[-1] == "stopped", out
    assert sent > 1000, sent
