"""The backend catalog contract: named lowering targets with typed options.

This module pins the interface that ``pteforge.manager`` (plan resolution) and
``pteforge.server`` (``GET /v1/backends``) code against. Entries are registered
explicitly in :func:`pteforge.backends.default_catalog`; nothing registers itself
at import time.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from pteforge.backends.errors import UnknownBackendError


class EntryKind(enum.StrEnum):
    """What a catalog entry produces."""

    PORTABLE = "portable"  # no delegation
    PARTITIONER = "partitioner"  # a Partitioner (e.g. XnnpackPartitioner)
    DELEGATE = "delegate"  # a whole-graph DelegationSpec for a registered backend id
    QUANTIZER = "quantizer"  # a pt2e quantization recipe applied before lowering


class CatalogEntry(Protocol):
    """One named lowering target."""

    name: str
    kind: EntryKind
    backend_id: str | None
    description: str
    options_model: type[BaseModel]

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

    def __iter__(self) -> Iterator[CatalogEntry]:
        return iter(self.entries.values())

    def names(self) -> Sequence[str]:
        return sorted(self.entries)

    def describe(self) -> list[dict[str, Any]]:
        return [entry.describe() for entry in self]

    @classmethod
    def of(cls, entries: Iterable[CatalogEntry]) -> BackendCatalog:
        return cls({entry.name: entry for entry in entries})
