"""The sans-IO core's vocabulary: a :class:`Call` to make, the :class:`Reply` it got, the
:class:`Sink` a streamed body goes to, and when a call is tried again (:class:`Attempts`)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Protocol

import orjson

from pteforge.client.errors import APIError, TransportError, error_from_body

RETRY_STATUSES = frozenset({503})


class Sink(Protocol):
    """Where a streamed answer's body goes, chunk by chunk."""

    def headers(self) -> dict[str, str]:
        """Extra request headers for the next attempt (to resume where the last one broke)."""
        ...

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        """A successful answer begins."""
        ...

    def feed(self, chunk: bytes) -> bool:
        """Take a chunk; False stops reading (the sink has what it wanted)."""
        ...

    @property
    def received(self) -> int:
        """Bytes taken so far (progress resets the retry count)."""
        ...


@dataclass(slots=True)
class Call:
    """One HTTP exchange an operation asks for. ``files`` are multipart parts streamed from
    disk (field name -> path); ``sink`` streams the answer's body instead of buffering it."""

    method: str
    path: str
    ok: tuple[int, ...] = (200,)
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    files: Mapping[str, Path] | None = None
    data: dict[str, str] | None = None
    sink: Sink | None = None
    idempotent: bool = False

    def all_headers(self) -> dict[str, str]:
        """The call's headers plus what its sink adds for this attempt."""
        return {**self.headers, **self.sink.headers()} if self.sink else self.headers


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to a :class:`Call` (``body`` is empty when a sink took it)."""

    status: int
    headers: Mapping[str, str]
    body: bytes = b""

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter: ``backoff * 2**attempt`` up to ``max_backoff``
    seconds; a ``Retry-After`` header wins (up to ``max_retry_after``)."""

    retries: int = 4
    backoff: float = 0.25
    max_backoff: float = 8.0
    max_retry_after: float = 30.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        wait = _retry_after_seconds(retry_after)
        if wait is not None:
            return min(wait, self.max_retry_after)
        base = min(self.backoff * 2**attempt, self.max_backoff)
        return base * (0.5 + random.random() / 2)


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    from datetime import UTC, datetime

    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


class Attempts:
    """The retry bookkeeping of one call. Only idempotent calls are tried again: on 503 and
    on a broken connection; a stream that made progress before breaking starts a fresh
    count (it resumes, it does not repeat). ``server``, the base URL, names the server in
    a transport error."""

    def __init__(self, call: Call, policy: RetryPolicy, server: str = "") -> None:
        self.call = call
        self.policy = policy
        self.server = server
        self.attempt = 0
        self._received = 0

    def after_error(self, exc: Exception, retryable: bool = True) -> float:
        """The delay before the next try after a transport error, or raise TransportError
        (at once when the error is not ``retryable``: no second try would mend it)."""
        if self.call.sink is not None and self.call.sink.received > self._received:
            self._received, self.attempt = self.call.sink.received, 0
        if not retryable or not self.call.idempotent or self.attempt >= self.policy.retries:
            tries = f" after {self.attempt + 1} attempts" if self.attempt else ""
            raise TransportError(
                f"{self.call.method} {self.server}{self.call.path}: "
                f"{type(exc).__name__}: {exc}{tries}"
            ) from exc
        return self._next(None)

    def after_reply(self, reply: Reply) -> float | None:
        """The delay before the next try, or None when ``reply`` is final."""
        retryable = reply.status in RETRY_STATUSES and self.call.idempotent
        if not retryable or self.attempt >= self.policy.retries:
            return None
        return self._next(reply.headers.get("retry-after"))

    def _next(self, retry_after: str | None) -> float:
        delay = self.policy.delay(self.attempt, retry_after)
        self.attempt += 1
        return delay

    def result(self, reply: Reply) -> Reply:
        """``reply`` if it is a success, else the error it stands for. A retried ``DELETE``
        whose first try went through before the connection broke answers 404: done."""
        if reply.status in self.call.ok:
            return reply
        if self.call.method == "DELETE" and reply.status == 404 and self.attempt > 0:
            return reply
        raise api_error(reply, f"{self.call.method} {self.call.path}")


def api_error(reply: Reply, what: str) -> APIError:
    """The exception an error answer stands for."""
    try:
        body = reply.json()
    except ValueError:
        body = None
    text = reply.body[:200].decode("utf-8", errors="replace").strip()
    error = error_from_body(reply.status, body, f"{what} answered {reply.status} {text}".strip())
    error.retry_after = _retry_after_seconds(reply.headers.get("retry-after"))
    return error
