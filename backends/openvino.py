"""The ``openvino`` partitioner entry (upstream ``OpenvinoPartitioner``), executable here.

``OpenvinoBackend.preprocess`` converts each partition with OpenVINO's PyTorch frontend and
stores the model OpenVINO compiled for ``device`` (``CompiledModel.export_model``); the
runtime's ``OpenvinoBackend`` loads the ``openvino`` pip package at run time and imports that
blob for the same device. The same compile specs serve the whole-graph delegate
(``{"delegate": {"backend_id": "OpenvinoBackend", "compile_specs": [...]}}``).

Three limits of upstream (executorch 1.5.1) the entry states rather than hides:

- No precision hint: ``preprocess`` hands OpenVINO only ``device`` (each value as a string,
  while OpenVINO's ``config`` must be a dict) and the runtime imports the blob with no
  properties, so OpenVINO's own default decides: bf16 on CPUs with AVX512_BF16 or AMX (an
  MLP 2e-3 off eager). pteforge's processes therefore cap oneDNN below bf16
  (:data:`~pteforge.children.limits.FP32_CPU_ENV`, in every child's environment and set by
  the command line), which makes fp32 OpenVINO's default: fp32 methods stay fp32. A process
  of one's own that runs such a ``.pte`` needs the same variable before OpenVINO loads.
- No int8: a pt2e int8 graph (upstream's NNCF ``OpenVINOQuantizer`` included) lowers, but
  its runtime outputs differ from the quantized reference by 15-23% on a two-layer MLP,
  so partitions holding quantize/dequantize operators are refused
  (:class:`~pteforge.backends.support.FloatStaticOnly`).
- No dynamic shapes: an MLP exported with a dynamic batch (max 8) answered a batch of 5 with
  8 rows, and BERT with a dynamic sequence failed in ``preprocess`` ("'SymInt' object has no
  attribute 'type'"), so a program with a dynamic input dimension is refused, naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pteforge.backends.entry import PartitionerEntry
from pteforge.backends.options import OpenvinoOptions
from pteforge.backends.telemetry import block_openvino_telemetry
from pteforge.quiet import OPENVINO_IMPORT_NOTICE, dropping_native_lines

if TYPE_CHECKING:
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.backend.partitioner import Partitioner

OPENVINO_BACKEND_ID = "OpenvinoBackend"

INT8_REFUSAL = (
    "the openvino entry lowers fp32 programs only: with executorch 1.5.1 and openvino "
    "2026.2.1 a pt2e int8 graph (upstream's NNCF OpenVINOQuantizer included) lowers, but "
    "OpenvinoBackend's outputs differ from the quantized reference by 15-23% on a two-layer "
    "MLP; quantize with an xnnpack recipe and lower with xnnpack instead"
)


DYNAMIC_REFUSAL = (
    "the openvino entry lowers static shapes only: with executorch 1.5.1 and openvino "
    "2026.2.1 OpenvinoBackend answers a dynamic dimension with its upper bound (a batch of 5 "
    "came back as 8 rows, the rest garbage) or fails on a size computed from it; export "
    "without dynamic_shapes, or lower with xnnpack"
)


class OpenvinoEntry(PartitionerEntry[OpenvinoOptions]):
    """Delegates the operators OpenVINO's PyTorch frontend supports, fp32 only."""

    options_model = OpenvinoOptions
    name = "openvino"
    backend_id = OPENVINO_BACKEND_ID
    quantized_refusal = INT8_REFUSAL
    description = (
        "OpenvinoPartitioner: compiles supported fp32 operators with OpenVINO for a device "
        "(CPU by default); the runtime runs them through the openvino package. OpenVINO "
        "picks the inference precision itself: upstream passes no precision hint (neither "
        "its preprocess nor its runtime reads one), so pteforge's processes keep oneDNN "
        "from bf16 (ONEDNN_MAX_CPU_ISA) and fp32 methods run in fp32 on CPUs with bf16 "
        "(AVX512_BF16, AMX) too. Int8 recipes are refused: OpenvinoBackend's int8 outputs "
        "do not match the quantized reference."
    )

    def build_partitioner(self, options: OpenvinoOptions) -> Partitioner:
        """An ``OpenvinoPartitioner`` for ``device`` that refuses quantized graphs."""
        block_openvino_telemetry()
        with dropping_native_lines(OPENVINO_IMPORT_NOTICE):
            from executorch.backends.openvino.partitioner import OpenvinoPartitioner
        from pteforge.backends.support import FloatStaticOnly

        return FloatStaticOnly(OpenvinoPartitioner(openvino_compile_specs(options)))


def openvino_compile_specs(options: OpenvinoOptions) -> list[CompileSpec]:
    """The ``OpenvinoBackend`` compile specs :class:`OpenvinoOptions` stand for."""
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    return [CompileSpec("device", options.device.encode())]


__all__ = ["OPENVINO_BACKEND_ID", "OpenvinoEntry", "openvino_compile_specs"]
