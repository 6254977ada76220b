"""Checking a submitted plan up front, so a bad plan is a 422 now rather than a failed job."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from pteforge.backends.catalog import BackendCatalog
from pteforge.server.errors import InvalidRequestError


def canonical_plan(plan: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The plan with empty parts dropped, and the sha256 of its sorted-key JSON (dedupe key)."""
    canonical = {key: plan[key] for key in ("methods", "all") if plan.get(key)}
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
