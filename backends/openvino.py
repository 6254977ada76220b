"""The ``openvino`` partitioner entry (upstream ``OpenvinoPartitioner``), executable here.

``OpenvinoBackend.preprocess`` converts each partition with OpenVINO's PyTorch frontend and
stores the model OpenVINO compiled for ``device`` (``CompiledModel.export_model``); the
runtime's ``OpenvinoBackend`` loads the ``openvino`` pip package at run time and imports that
blob for the same device. The same compile specs serve the whole-graph delegate
(``{"delegate": {"backend_id": "OpenvinoBackend", "compile_specs": [...]}}``).

Two limits of upstream (executorch 1.5.1) the entry states rather than hides:

- No precision hint: ``preprocess`` hands OpenVINO only ``device`` (each value as a string,
  while OpenVINO's ``config`` must be a dict) and the runtime imports the blob with no
  properties, so OpenVINO's own default decides: fp32 where the CPU has no bf16, but bf16 on
  CPUs with AVX512_BF16 or AMX, where an fp32 method may miss a tight fp32 tolerance.
- No int8: a pt2e int8 graph (upstream's NNCF ``OpenVINOQuantizer`` included) lowers, but
  its runtime outputs differ from the quantized reference by 15-23% on a two-layer MLP,
  so partitions holding quantize/dequantize operators are refused (:class:`FloatOnly`).
"""

from __future__ import annotations

from typing import Any

from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import Partitioner, PartitionResult
from torch.export import ExportedProgram

from pteforge.backends.entry import Options, PartitionerEntry
from pteforge.backends.errors import BackendCatalogError
from pteforge.backends.options import OpenvinoOptions
from pteforge.backends.telemetry import block_openvino_telemetry
from pteforge.quiet import OPENVINO_IMPORT_NOTICE, dropping_native_lines

OPENVINO_BACKEND_ID = "OpenvinoBackend"

INT8_REFUSAL = (
    "the openvino entry lowers fp32 programs only: with executorch 1.5.1 and openvino "
    "2026.2.1 a pt2e int8 graph (upstream's NNCF OpenVINOQuantizer included) lowers, but "
    "OpenvinoBackend's outputs differ from the quantized reference by 15-23% on a two-layer "
    "MLP; quantize with an xnnpack recipe and lower with xnnpack instead"
)


class OpenvinoEntry(PartitionerEntry[OpenvinoOptions]):
    """Delegates the operators OpenVINO's PyTorch frontend supports, fp32 only."""

    options_model = OpenvinoOptions
    name = "openvino"
    backend_id = OPENVINO_BACKEND_ID
    description = (
        "OpenvinoPartitioner: compiles supported fp32 operators with OpenVINO for a device "
        "(CPU by default); the runtime runs them through the openvino package. OpenVINO "
        "picks the inference precision itself: upstream passes no precision hint (neither "
        "its preprocess nor its runtime reads one), so on CPUs with bf16 (AVX512_BF16, AMX) "
        "fp32 methods may run in bf16. Int8 recipes are refused: OpenvinoBackend's int8 "
        "outputs do not match the quantized reference."
    )

    def partitioner(self, options: Options = None) -> Partitioner:
        """An ``OpenvinoPartitioner`` for ``device`` that refuses quantized graphs."""
        parsed = self.validate(options)
        block_openvino_telemetry()
        with dropping_native_lines(OPENVINO_IMPORT_NOTICE):
            from executorch.backends.openvino.partitioner import OpenvinoPartitioner

        return FloatOnly(OpenvinoPartitioner(openvino_compile_specs(parsed)))


def openvino_compile_specs(options: OpenvinoOptions) -> list[CompileSpec]:
    """The ``OpenvinoBackend`` compile specs :class:`OpenvinoOptions` stand for."""
    return [CompileSpec("device", options.device.encode())]


class FloatOnly(Partitioner):
    """``inner``, refusing a program that holds quantize/dequantize operators."""

    def __init__(self, inner: Partitioner) -> None:
        super().__init__()
        self.inner = inner
        self.delegation_spec = inner.delegation_spec

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """``inner``'s partition; a quantized program raises ``BackendCatalogError``."""
        quantized = first_quantized_node(exported_program)
        if quantized is not None:
            raise BackendCatalogError(f"{INT8_REFUSAL} (found {quantized})")
        return self.inner.partition(exported_program)

    def ops_to_not_decompose(self, ep: ExportedProgram) -> Any:
        """``inner``'s operators kept whole through ``to_edge_transform_and_lower``."""
        return self.inner.ops_to_not_decompose(ep)


_QUANT_MARKERS = ("quantize_per_", "quantize_affine", "choose_qparams")


def first_quantized_node(program: ExportedProgram) -> str | None:
    """The name of the first quantize/dequantize call of ``program``, else None."""
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        target = str(getattr(node.target, "__name__", node.target))
        if any(marker in target for marker in _QUANT_MARKERS):
            return f"{node.name} ({target})"
    return None


__all__ = ["OPENVINO_BACKEND_ID", "FloatOnly", "OpenvinoEntry", "openvino_compile_specs"]
