"""Identifiers and the default clock."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def new_id(prefix: str) -> str:
    """A random, URL-safe id such as ``job_3f2a...`` (the prefix tells what it names)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)
