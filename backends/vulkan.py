"""The compile-only ``vulkan`` partitioner entry (upstream ``VulkanPartitioner``).

``VulkanBackend.preprocess`` serialises each partition to a Vulkan compute graph in pure
Python, so lowering works on Linux. *Executing* it needs ExecuTorch's Vulkan runtime, which
the pip runtime does not ship: :meth:`VulkanEntry.can_execute` is False here, the numerics
check reports such a method ``not_executable`` and the runtime refuses to load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pteforge.backends.entry import PartitionerEntry
from pteforge.backends.options import VulkanOptions

if TYPE_CHECKING:
    from executorch.exir.backend.partitioner import Partitioner

VULKAN_BACKEND_ID = "VulkanBackend"


class VulkanEntry(PartitionerEntry[VulkanOptions]):
    """Compiles supported operators to a Vulkan compute graph; compile-only here."""

    options_model = VulkanOptions
    name = "vulkan"
    backend_id = VULKAN_BACKEND_ID
    description = (
        "VulkanPartitioner: compiles supported operators to a Vulkan compute graph for "
        "GPUs (Android, desktop). Compile-only here: the ExecuTorch runtime installed from "
        "pip has no Vulkan backend, so its methods cannot run on this host."
    )

    def build_partitioner(self, options: VulkanOptions) -> Partitioner:
        """A ``VulkanPartitioner`` with the compile options of :class:`VulkanOptions`."""
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import (
            VulkanPartitioner,
        )

        return VulkanPartitioner(compile_options=options.model_dump())
