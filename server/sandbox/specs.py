"""Plain descriptions of programs and artifacts; JSON is the only form that crosses processes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The shared spec contracts (the store keeps what a loader reports, as is); MethodSpec is the
# sandbox's and the store's name for a method signature.
from pteforge.contracts.specs import MethodSignature as MethodSpec
from pteforge.contracts.specs import TensorSpec as TensorSpec  # re-exported for the workers
from pteforge.contracts.specs import methods_to_json


@dataclass(frozen=True)
class ArchiveManifest:
    """What the static validator learnt from a pt2 archive without loading it."""

    root: str
    methods: tuple[MethodSpec, ...]
    payload_bytes: int
    entry_count: int

    @property
    def method_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.methods)


@dataclass(frozen=True)
class ProgramDescription:
    """What a disposable worker reported after really loading a pt2 archive."""

    methods: tuple[MethodSpec, ...]

    @property
    def method_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.methods)

    def to_json(self) -> dict[str, Any]:
        return {"methods": methods_to_json(self.methods)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProgramDescription:
        return cls(tuple(MethodSpec.from_json(m) for m in data["methods"]))


@dataclass(frozen=True)
class PteDescription:
    """A verified ``.pte``: its digest, size and per-method tensor metadata."""

    sha256: str
    size_bytes: int
    methods: tuple[MethodSpec, ...]

    @property
    def method_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.methods)
