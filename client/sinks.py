"""Sinks for streamed answers: a download hashed as it is written (and resumed with a
``Range`` after a broken connection), and a job's event stream (resumed with
``Last-Event-ID``). No I/O beyond the file object they are handed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import BinaryIO

from pteforge.client.errors import ChecksumMismatchError, PteforgeError
from pteforge.client.models import Job
from pteforge.client.sse import Event, EventSink

ProgressCallback = Callable[[int, int | None], object]
StageCallback = Callable[[Job], object]


class DownloadSink:
    """Writes a body to ``file`` and hashes it on the way; ``check()`` compares the sha256
    with the artifact's (or, given only an id, with the ``ETag``, which is its sha256)."""

    def __init__(
        self, file: BinaryIO, sha256: str | None, on_progress: ProgressCallback | None
    ) -> None:
        self._file = file
        self._expected = sha256
        self._on_progress = on_progress
        self._hash = hashlib.sha256()
        self._etag: str | None = None
        self.received = 0
        self.total: int | None = None

    def headers(self) -> dict[str, str]:
        if self.received and self._etag:
            return {"Range": f"bytes={self.received}-", "If-Range": self._etag}
        return {}

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        self._etag = headers.get("etag") or self._etag
        if status == 206 and _range_start(headers.get("content-range")) == self.received:
            self.total = _range_total(headers.get("content-range"))
            return
        self._file.seek(0)  # a whole body: start over
        self._file.truncate()
        self._hash, self.received = hashlib.sha256(), 0
        length = headers.get("content-length")
        self.total = int(length) if length and length.isdigit() else None

    def feed(self, chunk: bytes) -> bool:
        self._file.write(chunk)
        self._hash.update(chunk)
        self.received += len(chunk)
        if self._on_progress is not None:
            self._on_progress(self.received, self.total)
        return True

    def check(self) -> str:
        """The body's sha256; raises ChecksumMismatchError when it is not the expected one."""
        digest = self._hash.hexdigest()
        expected = self._expected or (self._etag or "").removeprefix("W/").strip('"') or None
        if self.total is not None and self.received != self.total:
            raise ChecksumMismatchError(f"got {self.received} of {self.total} bytes")
        if expected is not None and digest != expected:
            raise ChecksumMismatchError(f"the download's sha256 is {digest}, expected {expected}")
        return digest


def _range_start(content_range: str | None) -> int | None:
    try:
        return int((content_range or "").split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def _range_total(content_range: str | None) -> int | None:
    total = (content_range or "").rpartition("/")[2]
    return int(total) if total.isdigit() else None


class JobEventSink(EventSink):
    """Reads a job's ``job`` events (each the job as it was then) until ``end``."""

    def __init__(self, on_stage: StageCallback | None) -> None:
        super().__init__()
        self._on_stage = on_stage
        self.job: Job | None = None
        self.ended = False

    def headers(self) -> dict[str, str]:
        last = self._parser.last_id
        return {"Last-Event-ID": last} if last else {}

    def event(self, event: Event) -> bool:
        if event.event == "end":
            self.ended = True
            return False
        if event.event == "job":
            self._job_event(event.data)
        return True

    def _job_event(self, data: str) -> None:
        try:
            self.job = Job.from_json(json.loads(data))
        except (ValueError, KeyError, TypeError) as exc:
            raise PteforgeError(f"a job event is not a job: {exc}") from None
        if self._on_stage is not None:
            self._on_stage(self.job)
