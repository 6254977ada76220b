"""The ``xnnpack`` partitioner entry (upstream ``XnnpackPartitioner``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pteforge.backends.entry import PartitionerEntry
from pteforge.backends.options import XnnpackOptions

if TYPE_CHECKING:
    from executorch.exir.backend.partitioner import Partitioner

XNNPACK_BACKEND_ID = "XnnpackBackend"


class XnnpackEntry(PartitionerEntry[XnnpackOptions]):
    """Delegates the operators XNNPACK supports (fp32 and int8 quantized patterns)."""

    options_model = XnnpackOptions
    name = "xnnpack"
    backend_id = XNNPACK_BACKEND_ID
    description = "XnnpackPartitioner: delegates supported fp32 and quantized operators to XNNPACK."

    def build_partitioner(self, options: XnnpackOptions) -> Partitioner:
        """An ``XnnpackPartitioner`` configured by :class:`XnnpackOptions`."""
        from executorch.backends.xnnpack.partition.config.xnnpack_config import (
            ConfigPrecisionType,
        )
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )

        precision = None
        if options.precision is not None:
            precision = ConfigPrecisionType[options.precision.upper()]
        return XnnpackPartitioner(config_precisions=precision, per_op_mode=options.per_op_mode)
