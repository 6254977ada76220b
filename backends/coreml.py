"""The compile-only ``coreml`` partitioner entry (upstream ``CoreMLPartitioner``).

``CoreMLBackend.preprocess_multimethod`` converts every method with coremltools and, with the
default ``positional`` strategy, merges them into one multifunction ``.mlpackage`` stored once
in the program's named data, so methods share weights. Conversion and merging are pure Python
and work on Linux; *executing* a CoreML model needs Apple's Core ML framework, so the runtime
here has no ``CoreMLBackend`` and :meth:`CoreMLEntry.can_execute` is False.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pteforge.backends.entry import PartitionerEntry
from pteforge.backends.errors import BackendCatalogError
from pteforge.backends.options import CoreMLOptions

if TYPE_CHECKING:
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.backend.partitioner import Partitioner

COREML_BACKEND_ID = "CoreMLBackend"


class CoreMLEntry(PartitionerEntry[CoreMLOptions]):
    """Compiles supported operators to Core ML; runs only on Apple platforms."""

    options_model = CoreMLOptions
    name = "coreml"
    backend_id = COREML_BACKEND_ID
    description = (
        "CoreMLPartitioner: compiles supported operators to a Core ML model; methods "
        "lowered together become one multifunction model with shared weights. "
        "Compile-only here: Core ML models execute only on Apple platforms."
    )

    def build_partitioner(self, options: CoreMLOptions) -> Partitioner:
        """A ``CoreMLPartitioner`` with compile specs built from :class:`CoreMLOptions`."""
        from executorch.backends.apple.coreml.partition import CoreMLPartitioner

        return CoreMLPartitioner(
            compile_specs=coreml_compile_specs(options),
            skip_ops_for_coreml_delegation=list(options.skip_ops),
            take_over_mutable_buffer=options.take_over_mutable_buffer,
            lower_full_graph=options.lower_full_graph,
        )


def coreml_compile_specs(options: CoreMLOptions) -> list[CompileSpec]:
    """The ``CoreMLBackend`` compile specs that :class:`CoreMLOptions` stand for."""
    try:
        import coremltools as ct
        from executorch.backends.apple.coreml.compiler.coreml_preprocess import (
            MULTIMETHOD_WEIGHT_SHARING_STRATEGY,
            CoreMLBackend,
        )
    except ImportError as error:
        raise BackendCatalogError(f"the coreml entry needs coremltools: {error}") from error
    target = options.minimum_deployment_target
    specs: list[CompileSpec] = CoreMLBackend.generate_compile_specs(
        compute_unit=ct.ComputeUnit[options.compute_unit],
        minimum_deployment_target=None if target is None else ct.target[target],
        compute_precision=ct.precision(options.compute_precision),
    )
    strategy = MULTIMETHOD_WEIGHT_SHARING_STRATEGY(options.multimethod_weight_sharing)
    specs.append(CoreMLBackend.generate_multimethod_weight_sharing_strategy_compile_spec(strategy))
    return specs
