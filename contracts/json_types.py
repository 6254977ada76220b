"""The JSON value types the contracts use for documents another layer owns."""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator, Field, JsonValue
from pydantic_core import PydanticCustomError

JsonObject = dict[str, JsonValue]
"""A JSON object (a plan, a report, a numerics record, a dumped contract)."""

T = TypeVar("T")

FailFastList = Annotated[list[T], Field(fail_fast=True)]
"""A list whose validation stops at its first bad item: pydantic would report every one,
~1 KB of error each, so a 16 MiB body of bad items took gigabytes."""

__all__ = ["FailFastList", "JsonObject", "JsonValue", "at_most_entries", "plain_json"]


def plain_json(value: Any) -> Any:
    """``value`` as JSON would carry it: tuples become lists, NaN and infinities stay (as the
    ``json`` module writes them). For documents built by code that knows nothing of JSON."""
    return json.loads(json.dumps(value))


def at_most_entries(limit: int) -> BeforeValidator:
    """Refuses a JSON object of more than ``limit`` entries before its values are validated.
    Pydantic reports every bad value of a dict (~1 KB of error each: a 16 MiB body of them
    is gigabytes); lists stop at their first bad item with ``Field(fail_fast=True)``."""

    def check(value: Any) -> Any:
        if isinstance(value, dict) and len(value) > limit:
            raise PydanticCustomError(
                "too_many_entries",
                "at most {limit} entries, got {count}",
                {"limit": limit, "count": len(value)},
            )
        return value

    return BeforeValidator(check)
