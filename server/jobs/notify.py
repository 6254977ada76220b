"""Wake-ups of compile workers from PostgreSQL ``LISTEN``/``NOTIFY``.

The job store publishes on :mod:`pteforge.storage.notifications` channels in the transaction
that queues or cancels a job; :class:`JobNotifications` listens on a dedicated connection in
a thread of each worker, on any machine, and calls back. When the connection drops it
reconnects with a backoff and reports itself not listening meanwhile, so the worker polls
at its short interval until notifications flow again. SQLite has no notifications
(:func:`notifications_for` returns None): there the local server signals its workers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg
from sqlalchemy.engine import make_url

from pteforge.storage.notifications import JOB_CANCEL_CHANNEL, JOB_QUEUED_CHANNEL

log = logging.getLogger(__name__)

_RECEIVE_SECONDS = 0.5  # how often the listening thread looks at its stop flag
_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)  # reconnection backoff


class JobNotifications:
    """A thread that LISTENs for queued and canceled jobs and calls ``on_queued()`` and
    ``on_cancel(job_id)`` (on its own thread: keep them short)."""

    def __init__(
        self,
        conninfo: str,
        on_queued: Callable[[], None],
        on_cancel: Callable[[str], None],
    ) -> None:
        self._conninfo = conninfo
        self._on_queued = on_queued
        self._on_cancel = on_cancel
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-notifications", daemon=True)

    @property
    def listening(self) -> bool:
        """Whether notifications are being received now (else the caller should poll)."""
        return self._listening.is_set()

    def wait_listening(self, timeout: float) -> bool:
        """Block until listening (or ``timeout`` seconds); returns :attr:`listening`."""
        return self._listening.wait(timeout)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        failures = 0  # consecutive connection attempts that never got to listen
        while not self._stop.is_set():
            try:
                self._listen()
            except psycopg.Error as exc:
                failures = 0 if self._listening.is_set() else failures + 1
                self._listening.clear()
                delay = _RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)]
                log.warning("job notifications lost (%s); retrying in %.1fs", exc, delay)
                self._stop.wait(delay)
        self._listening.clear()

    def _listen(self) -> None:
        with psycopg.connect(self._conninfo, autocommit=True) as conn:
            conn.execute(f"LISTEN {JOB_QUEUED_CHANNEL}")
            conn.execute(f"LISTEN {JOB_CANCEL_CHANNEL}")
            self._listening.set()
            self._on_queued()  # a job queued while we were not listening is claimable now
            while not self._stop.is_set():
                for note in conn.notifies(timeout=_RECEIVE_SECONDS):
                    if note.channel == JOB_CANCEL_CHANNEL:
                        self._on_cancel(note.payload)
                    else:
                        self._on_queued()


def notifications_for(
    database_url: str, on_queued: Callable[[], None], on_cancel: Callable[[str], None]
) -> JobNotifications | None:
    """A listener for ``database_url`` if it is PostgreSQL, else None (not started)."""
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        return None
    conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
    return JobNotifications(conninfo, on_queued, on_cancel)
