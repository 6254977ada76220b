"""``Range`` headers of downloads, parsed without a server (red-team pass): a position of
5000 digits was a 500 (``int()`` takes at most 4300), and ``\\d`` took non-ASCII digits."""

from __future__ import annotations

import pytest

from pteforge.server.errors import RangeNotSatisfiableError
from pteforge.server.http.ranges import ByteRange, parse_range

HUGE = "9" * 5000


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-9", ByteRange(0, 9, 100)),
        ("bytes=90-", ByteRange(90, 99, 100)),
        ("bytes=-10", ByteRange(90, 99, 100)),
        (f"bytes=0-{HUGE}", ByteRange(0, 99, 100)),
        (f"bytes=-{HUGE}", ByteRange(0, 99, 100)),
        ("bytes=" + "0" * 30 + "5-9", ByteRange(5, 9, 100)),
        (f"bytes=5-{'0' * 30}4", None),  # last before first: ignored
        ("bytes=\u0661-9", None),  # ARABIC-INDIC DIGIT ONE: not a position
    ],
)
def test_ranges(header: str, expected: ByteRange | None) -> None:
    assert parse_range(header, 100) == expected


@pytest.mark.parametrize("header", [f"bytes={HUGE}-", f"bytes={HUGE}-{HUGE}", "bytes=100-"])
def test_a_range_past_the_body_is_416_and_short(header: str) -> None:
    with pytest.raises(RangeNotSatisfiableError) as refused:
        parse_range(header, 100)
    assert len(str(refused.value)) < 200
