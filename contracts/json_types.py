"""The JSON value types the contracts use for documents another layer owns."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, JsonValue
from pydantic_core import PydanticCustomError

JsonObject = dict[str, JsonValue]
"""A JSON object (a plan, a report, a numerics record, a dumped contract)."""

T = TypeVar("T")

FailFastList = Annotated[list[T], Field(fail_fast=True)]
"""A list whose validation stops at its first bad item: pydantic would report every one,
~1 KB of error each, so a 16 MiB body of bad items took gigabytes."""


class Contract(BaseModel):
    """A message between processes or layers: immutable once built, unknown fields refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


__all__ = [
    "Base64Text",
    "Contract",
    "FailFastList",
    "JsonObject",
    "JsonValue",
    "at_most_entries",
    "plain_json",
]


def _decodes_as_base64(value: str) -> str:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as error:
        raise PydanticCustomError(
            "base64", "not valid base64: {error}", {"error": str(error)}
        ) from None
    return value


Base64Text = Annotated[str, AfterValidator(_decodes_as_base64)]
"""Bytes as base64 text (the standard alphabet, padding included), refused when it does
not decode."""


def plain_json(value: Any) -> Any:
    """``value`` as JSON would carry it: tuples become lists, NaN and infinities stay (as the
    ``json`` module writes them). For documents built by code that knows nothing of JSON."""
    return json.loads(json.dumps(value))


def at_most_entries(limit: int) -> BeforeValidator:
    """Refuses a JSON object of more than ``limit`` entries (or an array of more than
    ``limit`` items) before its values are validated. Pydantic reports every bad value of a
    dict (~1 KB of error each: a 16 MiB body of them is gigabytes); lists stop at their first
    bad item with ``Field(fail_fast=True)``, but a list's ``max_length`` is checked only once
    every item is built (16 MiB of one-letter chat messages: 559,000 models, 4 s, 500 MiB)."""

    def check(value: Any) -> Any:
        if isinstance(value, dict | list | tuple) and len(value) > limit:
            raise PydanticCustomError(
                "too_many_entries",
                "at most {limit} entries, got {count}",
                {"limit": limit, "count": len(value)},
            )
        return value

    return BeforeValidator(check)
