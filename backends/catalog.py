"""The backend catalog contract: named lowering targets with typed options.

This module pins the interface that ``pteforge.manager`` (plan resolution) and
``pteforge.server`` (``GET /v1/backends``) code against. Entries are registered
explicitly in :func:`pteforge.backends.default_catalog`; nothing registers itself
at import time.

Besides per-method targets, a plan has program-wide options (:data:`PLAN_OPTIONS`, listed by
``GET /v1/backends`` with kind ``plan_option``):

- ``"share_mutable_buffers": true``: memory planning gives a mutable buffer one allocation that
  every method of the program addresses (upstream ``MemoryPlanningPass(share_mutable_buffers=
  True)``), so ``prefill`` writes the KV cache ``decode`` reads. A runtime must load every
  method before running any: loading a method writes the buffers that have a non-zero initial
  value back to it.
- ``"verify": {"rtol": 1e-4, "min_sqnr_db": 20.0}``: tolerances of the numerics check run on
  every artifact; an fp32 method passes when its max relative error is at most ``rtol``, a
  quantized one when its SQNR is at least ``min_sqnr_db``.
"""

from __future__ import annotations

import copy
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
from pteforge.contracts.plan import DEFAULT_VERIFY_MIN_SQNR_DB, DEFAULT_VERIFY_RTOL, VerifySpec

__all__ = [
    "DEFAULT_VERIFY_MIN_SQNR_DB",
    "DEFAULT_VERIFY_RTOL",
    "PLAN_OPTIONS",
    "BackendCatalog",
    "CatalogEntry",
    "EntryKind",
]

E = TypeVar("E", bound=BaseEntry[Any])

# Program-wide plan options, described in the shape of a catalog entry.
PLAN_OPTIONS: tuple[dict[str, Any], ...] = (
    {
        "name": "share_mutable_buffers",
        "kind": "plan_option",
        "backend_id": None,
        "options_schema": {"type": "boolean", "default": False},
        "can_execute": True,
        "description": (
            'Plan key "share_mutable_buffers": true plans each mutable buffer once for the '
            "whole program (upstream MemoryPlanningPass(share_mutable_buffers=True)), so every "
            "method of one loaded program addresses the same state, e.g. prefill writes the KV "
            "cache decode reads. Buffers with a non-zero initial value keep it in the .pte and "
            "get it back whenever a method is loaded: load every method before running any."
        ),
    },
    {
        "name": "verify",
        "kind": "plan_option",
        "backend_id": None,
        "options_schema": VerifySpec.model_json_schema(),
        "can_execute": True,
        "description": (
            'Plan key "verify": tolerances of the numerics check that runs every compiled '
            "method in the ExecuTorch runtime on the program's example inputs and compares it "
            "with the exported program: an fp32 method passes when max |a-b| / max |b| is at "
            "most rtol, a quantized method when its SQNR is at least min_sqnr_db."
        ),
    },
)


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
