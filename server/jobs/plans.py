"""Checking a submitted plan up front, so a bad plan is a 422 now rather than a failed job."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from pteforge.backends.catalog import BackendCatalog


def _means_absent(key: str, value: Any) -> bool:
    if key in ("methods", "all", "verify"):
        return value is None or value == {}
    return key == "share_mutable_buffers" and value is False


def canonical_plan(plan: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The plan without parts that mean the same as leaving them out (empty ``methods``,
    ``all`` or ``verify``, ``share_mutable_buffers`` false), and the sha256 of its sorted-key
    JSON (the dedupe key). Unknown keys stay, so that checking the plan refuses them."""
    canonical = {key: value for key, value in plan.items() if not _means_absent(key, value)}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return canonical, hashlib.sha256(text.encode()).hexdigest()


def check_plan(plan: dict[str, Any], methods: Iterable[str], catalog: BackendCatalog) -> None:
    """Parse ``plan`` and check it against the program's methods and the catalog, as the
    library does before compiling (``pteforge.manager.plan_check``): a bad plan is a 422 now,
    naming the field as written, rather than a failed job later."""
    from pteforge.manager.plan import Plan
    from pteforge.manager.plan_check import check_plan as check_against

    check_against(Plan.parse(plan), sorted(methods), catalog)
