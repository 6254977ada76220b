"""The framing of a /v2 infer body: the binary extension's JSON header length."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from pteforge.runtime.errors import ProtocolError
from pteforge.server.inference.bodies import header_length


def _request(*length: str) -> Request:
    headers = [(b"inference-header-content-length", value.encode()) for value in length]
    return Request({"type": "http", "headers": headers})


def test_the_header_length_is_a_count_of_bytes() -> None:
    """int() took '+16', '1_6' and ' 16' as 16 (attack pass, found and left open)."""
    assert header_length(_request()) is None
    assert header_length(_request("16")) == 16
    for sent in ("+16", "1_6", " 16", "-1", "0x10", "16.0", "١٦", ""):
        with pytest.raises(ProtocolError, match="must be a count of bytes, got"):
            header_length(_request(sent))
