"""A wake-up sent to a compile worker that is still starting waits for its handler.

The server sends SIGUSR1 to its workers for every queued job, also to one it has just
started and which still imports for seconds: the signal's default action killed it (exit
-10) and the supervisor had to start it again (every time a job was queued right after a
worker was replaced, as in test_restart).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from pteforge.server.jobs.compile_workers import wake_ups_held

# A worker's start in small: it installs its handlers only once the test has sent its
# wake-up (a line on stdin), then reports whether the wake-up reached the handler.
_PROCESS = textwrap.dedent(
    """
    import signal, sys, threading
    from pteforge.server.jobs.compile_workers import handle_signals_on_a_thread

    sys.stdin.readline()
    woken = threading.Event()
    handle_signals_on_a_thread({signal.SIGUSR1: woken.set})
    print("woken" if woken.wait(60) else "not woken", flush=True)
    """
)


def test_a_wake_up_sent_before_the_handlers_waits_for_them() -> None:
    with wake_ups_held():
        proc = subprocess.Popen(
            [sys.executable, "-c", _PROCESS],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
    try:
        proc.send_signal(signal.SIGUSR1)  # still starting: no handler yet
        out, _ = proc.communicate("go\n", timeout=120)
    finally:
        proc.kill()
    assert (proc.returncode, out.strip()) == (0, "woken")
