"""Keeps N compile worker processes alive for the lifetime of their parent.

Workers are plain OS processes (running ``pteforge.server.jobs.worker``) that share the
job queue through storage, so their number is just a setting and other machines can run
more of them: ``pteforge serve`` supervises its own, ``pteforge worker`` runs only workers
(:func:`run_workers`). A worker that exits is restarted; on shutdown all get SIGTERM, then
SIGKILL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping

from pydantic import SecretStr

from pteforge.children.limits import WEIGHTS_ONLY_ENV
from pteforge.server.settings import Settings
from pteforge.server.startup.host import report_confinement

log = logging.getLogger(__name__)

_CHECK_SECONDS = 0.5
_RESTART_BACKOFF_SECONDS = 1.0
_STOP_GRACE_SECONDS = 5.0
# Run with -c, not -m: a -m module is its process's __main__, which multiprocessing runs again
# (runpy) in every lowering child forked from the worker's fork server, with a RuntimeWarning.
_WORKER_MAIN = "import sys; from pteforge.server.jobs.worker import main; sys.exit(main())"


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process read the same settings."""
    env = dict(os.environ)
    for key, value in settings.model_dump().items():
        name = f"PTEFORGE_{key.upper()}"
        if value is None and Settings.model_fields[key].default is not None:
            env[name] = "none"  # no limit, where the default is one
        elif value is None:
            env.pop(name, None)
        else:  # a secret as itself, not its mask
            env[name] = str(value.get_secret_value() if isinstance(value, SecretStr) else value)
    env.update(WEIGHTS_ONLY_ENV)
    return env


class WorkerSupervisor:
    """Starts, restarts and stops the compile worker processes."""

    def __init__(self, settings: Settings, count: int) -> None:
        self._env: Mapping[str, str] = settings_env(settings)
        self._count = count
        self._procs: list[subprocess.Popen[bytes] | None] = [None] * count
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="worker-supervisor", daemon=True)

    def start(self) -> None:
        for slot in range(self._count):
            self._spawn(slot)
        self._thread.start()

    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p is not None]

    def wake(self) -> None:
        """Tell idle workers a job was queued, so they claim it now rather than at their
        next poll (workers elsewhere hear of it from PostgreSQL, or poll)."""
        self._signal(signal.SIGUSR1)

    def interrupt(self) -> None:
        """Tell busy workers a cancel was requested: the one running that job kills its
        lowering process now rather than at its next heartbeat."""
        self._signal(signal.SIGUSR2)

    def _signal(self, signum: int) -> None:
        for proc in self._procs:
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signum)

    def _spawn(self, slot: int) -> None:
        cmd = [sys.executable, "-c", _WORKER_MAIN, "--name", f"w{slot}"]
        # Own session: a terminal's Ctrl+C reaches the server, which then stops the workers
        # in order; a worker notices by itself when the server is gone.
        with wake_ups_held():
            self._procs[slot] = subprocess.Popen(cmd, env=dict(self._env), start_new_session=True)
        log.info("compile worker %d started (pid %d)", slot, self._procs[slot].pid)  # type: ignore[union-attr]

    def _watch(self) -> None:
        while not self._stop.wait(_CHECK_SECONDS):
            for slot, proc in enumerate(self._procs):
                if proc is None or proc.poll() is None:
                    continue
                log.warning("compile worker %d exited with %s; restarting", slot, proc.returncode)
                if self._stop.wait(_RESTART_BACKOFF_SECONDS):
                    return
                self._spawn(slot)

    def stop(self) -> None:
        """Stop watching, then terminate every worker (a worker kills its lowering process)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        live = [p for p in self._procs if p is not None and p.poll() is None]
        for proc in live:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE_SECONDS
        for proc in live:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


_WAKE_UPS = frozenset({signal.SIGUSR1, signal.SIGUSR2})


@contextlib.contextmanager
def wake_ups_held() -> Iterator[None]:
    """Block SIGUSR1 and SIGUSR2 in this thread for the block: a worker started inside it
    inherits the mask, so a wake-up or cancel sent while it still imports (seconds) stays
    pending until :func:`handle_signals_on_a_thread` unblocks it, instead of killing it (the
    signals' default action). A job queued right after a worker was replaced killed the new
    one with SIGUSR1 (exit -10), which then had to start a third time."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _WAKE_UPS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def handle_signals_on_a_thread(handlers: Mapping[int, Callable[[], None]]) -> None:
    """Run ``handlers[signum]`` on a thread of its own for each signal received (call from
    the main thread, once).

    Not in a Python signal handler: that runs between two bytecodes of the main thread,
    maybe while it holds the very lock the handler takes (an Event's, inside ``clear()``),
    and then waits for itself forever. That happened: a job queued just as the worker
    cleared its wake-up event was never claimed. Here the C-level handler only writes the
    signal's number to a pipe (``signal.set_wakeup_fd``), which the thread reads.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    for signum in handlers:
        signal.signal(signum, lambda *_: None)  # the wake-up fd does the work
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, handlers)  # held since wake_ups_held

    def dispatch() -> None:
        while True:
            for signum in os.read(read_fd, 512):
                handler = handlers.get(signum)
                if handler is not None:
                    handler()

    threading.Thread(target=dispatch, name="signals", daemon=True).start()


def run_workers(settings: Settings, count: int) -> None:
    """Supervise ``count`` workers in the foreground until SIGTERM or SIGINT (``pteforge
    worker``): a compile-only node of a deployment that shares the database."""
    stop = threading.Event()
    handle_signals_on_a_thread({signal.SIGTERM: stop.set, signal.SIGINT: stop.set})
    report_confinement(settings.home)  # logged: what this node's lowering children get
    supervisor = WorkerSupervisor(settings, count)
    supervisor.start()
    log.info("%d compile workers running; SIGTERM or Ctrl+C stops them", count)
    try:
        stop.wait()
    finally:
        supervisor.stop()
