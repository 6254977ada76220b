"""The backend catalog contract: named lowering targets with typed options.

This module pins the interface that ``pteforge.manager`` (plan resolution) and
``pteforge.server`` (``GET /v1/backends``) code against. Entries are registered
explicitly in :func:`pteforge.backends.default_catalog`; nothing registers itself
at import time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from pteforge.backends.entry import (
    BaseEntry,
    DelegateEntryBase,
    PartitionerEntry,
    QuantizerEntryBase,
)
from pteforge.backends.errors import BackendCatalogError, UnknownBackendError
from pteforge.backends.kinds import EntryKind

__all__ = ["BackendCatalog", "CatalogEntry", "EntryKind"]

E = TypeVar("E", bound=BaseEntry[Any])


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

    @classmethod
    def of(cls, entries: Iterable[CatalogEntry]) -> BackendCatalog:
        """A catalog of ``entries`` keyed by name; duplicate names are an error."""
        entries = list(entries)
        names = [entry.name for entry in entries]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise BackendCatalogError(f"duplicate catalog entries: {', '.join(duplicates)}")
        return cls({entry.name: entry for entry in entries})
