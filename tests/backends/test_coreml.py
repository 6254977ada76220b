"""CoreML: compile-only here, but multi-method lowering shares weights through one model."""

from __future__ import annotations

import json

from executorch.exir import to_edge
from executorch.exir._serialize._program import deserialize_pte_binary

from pteforge.backends import CoreMLOptions, default_catalog
from pteforge.backends.coreml import coreml_compile_specs
from tests.models import shared_linear_programs

FEATURES = 64


def compile_two_methods(weight_sharing: str) -> bytes:
    entry = default_catalog().get_partitioner("coreml")
    partitioner = entry.partitioner(
        {"multimethod_weight_sharing": weight_sharing, "compute_precision": "float32"}
    )
    model = shared_linear_programs(FEATURES)
    return bytes(to_edge(model.programs).to_backend(partitioner).to_executorch().buffer)


def test_coreml_cannot_execute_on_this_host() -> None:
    entry = default_catalog().get("coreml")
    assert entry.can_execute() is False
    assert entry.describe()["can_execute"] is False
    assert "Apple" in entry.description


def test_two_methods_compile_to_one_shared_multifunction_model() -> None:
    pte = compile_two_methods("positional")
    program = deserialize_pte_binary(pte)
    delegates = [d for plan in program.program.execution_plan for d in plan.delegates]
    assert [d.id for d in delegates] == ["CoreMLBackend", "CoreMLBackend"]
    # preprocess_multimethod stored the merged model once, as named data...
    assert program.named_data is not None
    (key,) = program.named_data.pte_data
    assert key.startswith("coreml_")
    # ...and each method's delegate payload is only a reference to its function in it.
    references = []
    for blob in program.program.backend_delegate_data:
        data = bytes(blob.data)
        assert data.startswith(b"CMJR"), data[:16]
        references.append(json.loads(data[4:]))
    assert {ref["key"] for ref in references} == {key}
    assert sorted(ref["functionName"] for ref in references) == ["decode", "encode"]


def test_weight_sharing_stores_the_shared_weight_once() -> None:
    shared = len(compile_two_methods("positional"))
    separate = len(compile_two_methods("disabled"))
    shared_weight_bytes = FEATURES * FEATURES * 4  # fp32 shared linear, in both methods
    assert separate - shared >= shared_weight_bytes


def test_options_become_coreml_compile_specs() -> None:
    options = CoreMLOptions(
        compute_unit="CPU_ONLY",
        compute_precision="float32",
        minimum_deployment_target="iOS17",
        multimethod_weight_sharing="disabled",
    )
    specs = {spec.key: spec.value for spec in coreml_compile_specs(options)}
    assert specs["compute_units"] == b"cpu_only"
    assert specs["model_compute_precision"] == b"float32"
    assert specs["multimethod_weight_sharing_strategy"] == b"disabled"
    assert "min_deployment_target" in specs


def test_compute_precision_reaches_the_compiled_model() -> None:
    entry = default_catalog().get_partitioner("coreml")
    model = shared_linear_programs(FEATURES)
    fp16 = to_edge(model.programs).to_backend(entry.partitioner({})).to_executorch().buffer
    # fp16 (the default) halves the 16 KiB fp32 shared weight; blob alignment eats a little.
    assert len(compile_two_methods("positional")) - len(fp16) >= FEATURES * FEATURES
