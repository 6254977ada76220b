"""Query parameters shared by the list routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000

LimitQuery = Annotated[
    int, Query(ge=1, le=MAX_LIMIT, description="At most this many items, newest first.")
]
