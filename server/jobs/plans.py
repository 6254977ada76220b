"""Checking a submitted plan up front, so a bad plan is a 422 now rather than a failed job."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from pteforge.backends.catalog import BackendCatalog
from pteforge.contracts.json_types import JsonObject, JsonValue
from pteforge.contracts.plan import PlanSpec


def _means_absent(key: str, value: JsonValue) -> bool:
    if key in ("methods", "all", "verify"):
        return value is None or value == {}
    return key == "share_mutable_buffers" and value is False


def canonical_plan(plan: PlanSpec) -> tuple[JsonObject, str]:
    """The plan's JSON as written (numbers of ``verify`` as floats), without parts that mean
    the same as leaving them out (empty ``methods``, ``all`` or ``verify``,
    ``share_mutable_buffers`` false), and the sha256 of its sorted-key JSON (the dedupe key)."""
    written = plan.model_dump(mode="json", exclude_unset=True)
    canonical = {key: value for key, value in written.items() if not _means_absent(key, value)}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return canonical, hashlib.sha256(text.encode()).hexdigest()


def check_plan(plan: PlanSpec, methods: Iterable[str], catalog: BackendCatalog) -> None:
    """Check the validated ``plan`` against the program's methods and the catalog, as the
    library does before compiling (``pteforge.manager.plan_check``): a bad plan is a 422 now,
    naming the field as written, rather than a failed job later."""
    from pteforge.manager.plan import Plan
    from pteforge.manager.plan_check import check_plan as check_against

    check_against(Plan.parse(plan), sorted(methods), catalog)
