"""The inputs a ``.pte`` method holds a constant for, read from its program flatbuffer.

``torch.export`` makes a non-tensor keyword (``use_cache=False``, ``scale=3.0``) an input
holding the value it was exported with, and the emitted method still takes it; ExecuTorch's
emitter stores that value in the method's values table (a string as None). The worker reads
the values here, lists those inputs as the signature's ``constants`` instead of its
``inputs`` (what a client sends), and :func:`pteforge.runtime.instances.run_method` puts
them back in their places.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pteforge.contracts.specs import ConstantInput, ConstantValue, MethodSignature
from pteforge.runtime.metadata import (
    MALFORMED_FLATBUFFER,
    ProgramFlatbuffer,
    input_name,
    program_table,
)

# Per method: the value of each input the program holds a constant for, by input index.
Constants = dict[str, dict[int, ConstantValue]]
# The flatbuffer's scalar EValue types and the field holding each one's value.
_SCALAR_FIELDS = {"Bool": "bool_val", "Int": "int_val", "Double": "double_val"}


def read_constants(source: ProgramFlatbuffer) -> Constants:
    """The inputs each method holds a constant for (a bool, int, float or None value);
    none where the flatbuffer is malformed (``read_dynamism`` warns about that)."""
    try:
        return {plan.name: _held(plan) for plan in program_table(source).execution_plan}
    except MALFORMED_FLATBUFFER:
        return {}


def _held(plan: Any) -> dict[int, ConstantValue]:
    held: dict[int, ConstantValue] = {}
    for index, value_index in enumerate(plan.inputs):
        value = plan.values[value_index].val
        kind = type(value).__name__
        if kind in _SCALAR_FIELDS:
            held[index] = getattr(value, _SCALAR_FIELDS[kind])
        elif kind == "Null":
            held[index] = None
    return held


def held_apart(
    signatures: dict[str, MethodSignature], constants: Constants
) -> dict[str, MethodSignature]:
    """``signatures`` (read from ``MethodMeta``, every input positional) with the inputs
    each method holds a constant for moved from ``inputs`` to ``constants``."""
    return {name: _apart(s, constants.get(name) or {}) for name, s in signatures.items()}


def _apart(signature: MethodSignature, held: dict[int, ConstantValue]) -> MethodSignature:
    if not held or max(held) >= len(signature.inputs):
        return signature
    inputs = tuple(spec for i, spec in enumerate(signature.inputs) if i not in held)
    fixed = tuple(ConstantInput(i, input_name(i), value) for i, value in sorted(held.items()))
    return replace(signature, inputs=inputs, constants=fixed)
