"""The JSON value types the contracts use for documents another layer owns."""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue

JsonObject = dict[str, JsonValue]
"""A JSON object (a plan, a report, a numerics record, a dumped contract)."""

__all__ = ["JsonObject", "JsonValue", "plain_json"]


def plain_json(value: Any) -> Any:
    """``value`` as JSON would carry it: tuples become lists, NaN and infinities stay (as the
    ``json`` module writes them). For documents built by code that knows nothing of JSON."""
    return json.loads(json.dumps(value))
