"""``Range`` / ``If-None-Match`` handling for content-addressed downloads."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pteforge.server.errors import RangeNotSatisfiableError

_RANGE = re.compile(r"^bytes=([0-9]*)-([0-9]*)$")
_FAR = 2**63
"""Past any body: a position of 19 digits or more reads as this (``int()`` refuses more than
4300 digits, a 500 before)."""


@dataclass(frozen=True)
class ByteRange:
    """An inclusive byte range ``start..end`` of a resource of ``size`` bytes."""

    start: int
    end: int
    size: int

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self) -> str:
        return f"bytes {self.start}-{self.end}/{self.size}"


def parse_range(header: str | None, size: int) -> ByteRange | None:
    """The single range a ``Range`` header asks for; None means "send it all".

    Multi-range, non-byte units and syntactically invalid ranges (a last position before
    the first, RFC 7233 2.1) are ignored, so they get the whole body (RFC 9110 14.2); a
    valid range that selects nothing of the resource raises 416.
    """
    if header is None:
        return None
    match = _RANGE.match(header.strip())
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    shown = header if len(header) <= 80 else f"{header[:60]}..."
    if not first:  # suffix: the last N bytes
        suffix = _position(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiableError(f"range {shown!r} selects no bytes", size)
        return ByteRange(max(0, size - suffix), size - 1, size)
    start = _position(first)
    if last and _position(last) < start:
        return None  # invalid, not unsatisfiable: the header is ignored
    end = min(_position(last), size - 1) if last else size - 1
    if start >= size:
        raise RangeNotSatisfiableError(f"range {shown!r} is outside the {size}-byte body", size)
    return ByteRange(start, end, size)


def _position(digits: str) -> int:
    significant = digits.lstrip("0") or "0"
    return int(significant) if len(significant) < 19 else _FAR


def quoted_etag(sha256: str) -> str:
    return f'"{sha256}"'


def etag_matches(if_none_match: str | None, sha256: str) -> bool:
    """Whether an ``If-None-Match`` header names this entity (weak or strong, or ``*``)."""
    if not if_none_match:
        return False
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if tag == "*" or tag.removeprefix("W/") == quoted_etag(sha256):
            return True
    return False
