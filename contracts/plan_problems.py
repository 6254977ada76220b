"""A plan's validation errors in the words of a plan: the field as the user wrote it
(``all.partitioners[0]``, ``methods.encode.delegate.backend_id``) and a reason that names
what is expected. The library (``PlanError``) and the service (422 ``invalid_plan``) both
answer with :func:`plan_problem`, so they say the same thing, and both command lines read
their ``--plan`` with :func:`read_plan_option`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, NamedTuple, Union, get_args, get_origin

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from pteforge.contracts.plan import NAME_TAG, OBJECT_TAG, PlanPart, PlanSpec

__all__ = ["PlanProblem", "plan_problem", "read_plan_option"]

Loc = tuple[str | int, ...]
_TAGS = (NAME_TAG, OBJECT_TAG)


class PlanProblem(NamedTuple):
    """What is wrong with a plan: ``field`` as written (``all.partitioners[0]``, ``plan`` for
    the whole plan) and the reason in words."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"plan field {self.field!r}: {self.message}"


def plan_problem(errors: Sequence[ErrorDetails], root: Loc = ()) -> PlanProblem | None:
    """The first of ``errors`` (of validating a :class:`PlanSpec` found at ``root``, e.g.
    ``("body", "plan")`` in a request) in the words of a plan, or None when none is there."""
    for error in errors:
        loc = tuple(error["loc"])
        if loc[: len(root)] == root:
            path = _written_path(loc[len(root) :])
            return PlanProblem(_field_text(path), _reason(path, error))
    return None


_REASONS = {
    "missing": "is required",
    "bool_type": "must be true or false",
    "float_type": "must be a number",
    "int_type": "must be an integer",
    "finite_number": "must be a finite number",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "string_too_short": "must not be empty",
    "too_short": "must not be empty",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
}
_OBJECT_TYPES = {"model_type", "model_attributes_type", "dict_type"}


def read_plan_option(value: str) -> dict[str, Any]:
    """``--plan VALUE``: inline JSON (starting with ``{``) or the path of a JSON file, checked
    by the plan's rules, so a typo is refused before anything is loaded or uploaded;
    ``ValueError`` naming what is wrong."""
    text = value
    if not value.lstrip().startswith("{"):
        try:
            text = Path(value).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"--plan {value}: not inline JSON and not a readable file") from exc
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--plan {value}: invalid JSON: {exc}") from exc
    try:
        PlanSpec.model_validate(plan)
    except ValidationError as exc:
        problem = plan_problem(exc.errors()) or "a plan is a JSON object"
        raise ValueError(f"--plan {value}: {problem}") from None
    return dict(plan)


def _written_path(loc: Loc) -> Loc:
    """``loc`` without the union tags pydantic puts after a partitioner's list index."""
    return tuple(
        p for i, p in enumerate(loc) if not (p in _TAGS and i and isinstance(loc[i - 1], int))
    )


def _field_text(path: Loc) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "plan"


def _reason(path: Loc, error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        part = _part_at(path[:-1])
        known = ", ".join(sorted(part.model_fields)) if part else ""
        return f"unknown field; {part.what} has {known}" if part else "unknown field"
    if kind in _OBJECT_TYPES:
        return f"must be an object, not {_json_type(error['input'])}"
    reason = _REASONS.get(kind)
    if reason is None:
        return error["msg"]
    return reason.format(**error.get("ctx", {}))


def _json_type(value: object) -> str:
    names = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "that")


def _part_at(path: Loc) -> type[PlanPart] | None:
    """The plan part (model) found at ``path`` of a :class:`PlanSpec`, if it is one."""
    candidates: list[Any] = [PlanSpec]
    for step in path:
        candidates = [child for tp in candidates for child in _children(tp, step)]
    members = [m for tp in candidates for m in _members(tp)]
    parts = [tp for tp in members if isinstance(tp, type) and issubclass(tp, PlanPart)]
    return parts[0] if parts else None


def _children(tp: Any, step: str | int) -> list[Any]:
    out: list[Any] = []
    for member in _members(tp):
        origin, args = get_origin(member), get_args(member)
        if (
            isinstance(member, type)
            and issubclass(member, PlanPart)
            and step in member.model_fields
        ):
            out.append(member.model_fields[str(step)].annotation)
        elif origin is list and isinstance(step, int):
            out.append(args[0])
        elif origin is dict and isinstance(step, str):
            out.append(args[1])
    return out


def _members(tp: Any) -> list[Any]:
    """``tp`` without ``Annotated`` and split into the members of a union."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _members(get_args(tp)[0])
    if origin in (Union, UnionType):
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]
