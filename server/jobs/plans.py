"""Checking a submitted plan up front, so a bad plan is a 422 now rather than a failed job."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from pteforge.backends.catalog import BackendCatalog
from pteforge.server.errors import InvalidRequestError


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
    """Parse ``plan`` with the manager and check every catalog name and option it uses.

    Raises the manager's ``PlanError`` or the catalog's errors (both answered 422).
    """
    from pteforge.manager.plan import Plan

    parsed = Plan.parse(plan)
    known = list(methods)
    unknown = sorted(set(parsed.methods) - set(known))
    if unknown:
        raise InvalidRequestError(
            f"plan names methods the program does not have: {', '.join(unknown)}; "
            f"the program has: {', '.join(sorted(known))}",
            code="invalid_plan",
        )
    for target in parsed.resolve(known).values():
        for ref in target.partitioners:
            entry = catalog.get(ref.name)
            validate = getattr(entry, "validate", None)
            if validate is not None:
                validate(dict(ref.options))
        if target.quantize:
            catalog.get(target.quantize)
