"""Bounds applied to untrusted uploads and to the worker processes that load them."""

from __future__ import annotations

from dataclasses import dataclass

from pteforge.children.limits import ChildLimits

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class ArchiveLimits:
    """Static bounds checked by the pt2 validator before any torch code reads the archive."""

    max_entries: int = 10_000
    max_total_uncompressed: int = 4 * GIB
    max_json_bytes: int = 64 * MIB
    max_compression_ratio: float = 200.0
    max_declared_tensor_bytes: int = 4 * GIB
    max_methods: int = 64
    max_expression_chars: int = 2_000


@dataclass(frozen=True)
class ProcessLimits:
    """Resource bounds of one disposable worker process."""

    memory_bytes: int = 6 * GIB
    cpu_seconds: int = 120
    wall_seconds: float = 180.0
    max_output_bytes: int = 16 * MIB

    @property
    def child(self) -> ChildLimits:
        """The limits the worker applies to itself (memory and CPU; no core dumps)."""
        return ChildLimits(memory_bytes=self.memory_bytes, cpu_seconds=self.cpu_seconds)
