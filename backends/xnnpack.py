"""The ``xnnpack`` partitioner entry (upstream ``XnnpackPartitioner``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
        return XnnpackPartitioner(
            configs=_configs(), config_precisions=precision, per_op_mode=options.per_op_mode
        )


def _configs() -> list[type]:
    """Upstream's partitioner configs, with ``gelu`` taken only where it is exact.

    ExecuTorch 1.5.1's ``GeluConfig`` ignores ``approximate`` and XNNPACK's GELU is the
    exact (erf) one, so ``gelu(x, approximate="tanh")`` (Gemma's ``gelu_pytorch_tanh``) ran the
    wrong function, 4.7e-4 off on [-6, 6]. Such a node stays with the portable kernel.
    """
    from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
    from executorch.backends.xnnpack.partition.config.generic_node_configs import GeluConfig

    class ExactGeluConfig(GeluConfig):
        def check_constraints(self, node: Any, ep: Any) -> bool:
            positional = node.args[1] if len(node.args) > 1 else "none"
            if node.kwargs.get("approximate", positional) != "none":
                return False
            return bool(super().check_constraints(node, ep))

    return [ExactGeluConfig if c is GeluConfig else c for c in ALL_PARTITIONER_CONFIGS]
