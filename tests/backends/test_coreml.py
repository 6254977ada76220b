"""CoreML: compile-only here, but multi-method lowering shares weights through one model."""

from __future__ import annotations

import json

from executorch.exir import to_edge
from executorch.exir._serialize._program import deserialize_pte_binary

from pteforge.backends import default_catalog
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
