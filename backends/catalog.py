"""The backend catalog contract: named lowering targets with typed options.

This module pins the interface that ``pteforge.manager`` (plan resolution) and
``pteforge.server`` (``GET /v1/backends``) code against. Entries are registered
explicitly in :func:`pteforge.backends.default_catalog`; nothing registers itself
at import time.

Besides per-method targets, a plan has program-wide options: :data:`PLAN_OPTIONS`, listed by
``GET /v1/backends`` with kind ``plan_option``, describes each one in the shape of a catalog
entry, generated from the fields of :class:`pteforge.contracts.plan.PlanSpec` (their types and
descriptions), so a new plan key is listed without being written down here.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Annotated, Any, Protocol, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from pteforge.backends.entry import (
    BaseEntry,
    DelegateEntryBase,
    PartitionerEntry,
    QuantizerEntryBase,
)
from pteforge.backends.errors import BackendCatalogError, UnknownBackendError
from pteforge.backends.kinds import EntryKind
from pteforge.contracts.plan import PlanSpec

__all__ = [
    "PLAN_OPTIONS",
    "BackendCatalog",
    "CatalogEntry",
    "EntryKind",
]

E = TypeVar("E", bound=BaseEntry[Any])


def _option_schema(field: FieldInfo) -> dict[str, Any]:
    """The JSON schema of a plan option's value: its type without ``None`` (leaving the key
    out is how a plan says none), with its default when it has one."""
    value_type: Any = field.annotation
    if get_origin(value_type) in (Union, UnionType):
        value_type = next(m for m in get_args(value_type) if m is not NoneType)
    if field.metadata:
        value_type = Annotated[(value_type, *field.metadata)]
    schema = TypeAdapter(value_type).json_schema()
    if field.default not in (None, PydanticUndefined):
        schema["default"] = field.default
    return schema


def _plan_option(name: str, field: FieldInfo) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "plan_option",
        "backend_id": None,
        "options_schema": _option_schema(field),
        "can_execute": True,
        "description": f'Plan key "{name}": {field.description}',
    }


PLAN_OPTIONS: tuple[dict[str, Any], ...] = tuple(
    _plan_option(name, field) for name, field in PlanSpec.program_wide().items()
)
"""The program-wide plan options, each in the shape of a catalog entry."""


class CatalogEntry(Protocol):
    """One named lowering target (read-only view; see ``pteforge.backends.entry``)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> EntryKind: ...

    @property
    def backend_id(self) -> str | None: ...

    @property
    def description(self) -> str: ...

    @property
    def options_model(self) -> type[BaseModel]: ...

    def can_execute(self) -> bool:
        """Whether ``executorch.runtime`` on this host has the backend this entry targets."""
        ...

    def describe(self) -> dict[str, Any]:
        """JSON description: name, kind, backend_id, options_schema, can_execute, description."""
        ...


@dataclass(frozen=True)
class BackendCatalog:
    """An explicit registry of catalog entries by name."""

    entries: Mapping[str, CatalogEntry]

    def get(self, name: str) -> CatalogEntry:
        """Return the entry called ``name``; unknown names raise listing the known ones."""
        try:
            return self.entries[name]
        except KeyError:
            raise UnknownBackendError("backend", name, self.entries) from None

    def get_partitioner(self, name: str) -> PartitionerEntry[Any]:
        """The partitioner entry ``name``; other kinds raise ``BackendCatalogError``."""
        return self._get_as(name, PartitionerEntry)  # type: ignore[type-abstract]

    def get_quantizer(self, name: str) -> QuantizerEntryBase:
        """The quantization recipe ``name``; other kinds raise ``BackendCatalogError``."""
        return self._get_as(name, QuantizerEntryBase)  # type: ignore[type-abstract]

    def get_delegate(self, name: str = "delegate") -> DelegateEntryBase[Any]:
        """The whole-graph delegation entry; other kinds raise ``BackendCatalogError``."""
        return self._get_as(name, DelegateEntryBase)  # type: ignore[type-abstract]

    def names_of_kind(self, kind: EntryKind) -> list[str]:
        """Sorted names of the entries of ``kind``."""
        return sorted(entry.name for entry in self if entry.kind == kind)

    def _get_as(self, name: str, cls: type[E]) -> E:
        entry = self.get(name)
        if not isinstance(entry, cls):
            wanted = cls.kind.value
            others = ", ".join(self.names_of_kind(cls.kind))
            raise BackendCatalogError(
                f"{name!r} is a {entry.kind.value} entry, not a {wanted}; "
                f"{wanted} entries: {others}"
            )
        return entry

    def __iter__(self) -> Iterator[CatalogEntry]:
        return iter(self.entries.values())

    def names(self) -> Sequence[str]:
        """Sorted names of every entry."""
        return sorted(self.entries)

    def describe(self) -> list[dict[str, Any]]:
        """JSON-serialisable descriptions of every entry, in registration order."""
        return [entry.describe() for entry in self]

    def describe_with_plan_options(self) -> list[dict[str, Any]]:
        """:meth:`describe`, then the program-wide plan options (``GET /v1/backends``)."""
        return [*self.describe(), *copy.deepcopy(PLAN_OPTIONS)]

    @classmethod
    def of(cls, entries: Iterable[CatalogEntry]) -> BackendCatalog:
        """A catalog of ``entries`` keyed by name; duplicate names are an error."""
        entries = list(entries)
        names = [entry.name for entry in entries]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise BackendCatalogError(f"duplicate catalog entries: {', '.join(duplicates)}")
        return cls({entry.name: entry for entry in entries})
