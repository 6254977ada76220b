"""The input checks' messages, on specs alone (no program, no worker)."""

from __future__ import annotations

import pytest

from pteforge.contracts.specs import DynamicDim, MethodSignature, TensorSpec
from pteforge.runtime.errors import InvalidInputError
from pteforge.runtime.validation import check_tensor, most_output_bytes

# resnet18 exported with Dim("batch", min=1, max=8) on axis 0, as its artifact describes it.
BATCHED = TensorSpec(
    name="x",
    dtype="float32",
    shape=(-1, 3, 64, 64),
    max_shape=(8, 3, 64, 64),
    dynamic_dims=(DynamicDim(axis=0, symbol="s77", min=1, max=8),),
)


@pytest.mark.parametrize("batch", [9, 64])
def test_a_batch_over_the_exported_range_names_the_dimension_and_the_range(batch: int) -> None:
    """Over the top of a ``Dim``'s range the planned bound is passed too; the answer names the
    dimension and the range (it quoted the planned bound and the whole shape before)."""
    with pytest.raises(InvalidInputError) as caught:
        check_tensor(BATCHED, "FP32", (batch, 3, 64, 64))
    assert str(caught.value) == (
        f"input 'x': dimension 0 is {batch}, outside the range 1..8 the program was exported "
        f"with, got [{batch}, 3, 64, 64]"
    )


def test_a_batch_within_the_range_passes_and_a_fixed_dimension_still_must_match() -> None:
    check_tensor(BATCHED, "FP32", (8, 3, 64, 64))
    with pytest.raises(InvalidInputError, match=r"expected a shape within \[8, 3, 64, 64\]"):
        check_tensor(BATCHED, "FP32", (2, 3, 32, 64))


def test_a_dimension_lowering_fixed_says_so() -> None:
    """A dynamic batch that lowering fixed at 2 (min = max) is not a range to quote."""
    fixed = TensorSpec("x", "float32", (-1, 8), (2, 8), (DynamicDim(0, "s0", 2, 2),))
    check_tensor(fixed, "FP32", (2, 8))
    with pytest.raises(InvalidInputError) as caught:
        check_tensor(fixed, "FP32", (1, 8))
    assert str(caught.value) == (
        "input 'x': dimension 0 is 1, but this .pte takes only 2 there: lowering fixed that "
        "dimension, which the program exported as dynamic, at the example input's size; "
        "got [1, 8]"
    )


def test_a_size_over_a_plan_made_for_the_example_input_says_why() -> None:
    """``Dim("batch")`` without ``max``: ExecuTorch plans the example input's batch (2), so a
    batch of 3 is refused, and the answer says why and what to export instead."""
    unbounded = TensorSpec(
        name="x",
        dtype="float32",
        shape=(-1, 4),
        max_shape=(2, 4),
        dynamic_dims=(DynamicDim(axis=0, symbol="s0", min=0),),
    )
    check_tensor(unbounded, "FP32", (2, 4))
    with pytest.raises(InvalidInputError) as caught:
        check_tensor(unbounded, "FP32", (3, 4))
    assert str(caught.value) == (
        "input 'x': dimension 0 is 3, over the 2 the .pte's memory was planned for: the "
        "program's range for it has no upper bound, so ExecuTorch planned for the example "
        "input; export with Dim(..., max=N) to take up to N"
    )


def test_a_stored_signature_without_a_planned_bound_takes_any_size_in_the_range() -> None:
    """An artifact's stored signature has the exported program's ``-1`` and range but no
    planned bound: a profile job of a dynamic-batch resnet18 refused its own numerics-check
    inputs ('expected shape [-1, 3, 224, 224], got [2, 3, 224, 224]', an internal error)."""
    stored = TensorSpec(
        name="x", dtype="float32", shape=(-1, 3, 64, 64), dynamic_dims=BATCHED.dynamic_dims
    )
    for batch in (1, 2, 8):
        check_tensor(stored, "FP32", (batch, 3, 64, 64))
    for shape in ((9, 3, 64, 64), (2, 3, 64, 32), (2, 3, 64)):
        with pytest.raises(InvalidInputError, match="input 'x'"):
            check_tensor(stored, "FP32", shape)


def test_a_bfloat16_tensor_is_bf16_at_two_bytes_an_element() -> None:
    """BF16 is carried (it was refused: numpy has no bfloat16); the request memory counts
    its outputs at 2 bytes an element."""
    x = TensorSpec(name="x", dtype="bfloat16", shape=(2, 8))
    logits = TensorSpec(name="logits", dtype="bfloat16", shape=(2, 4))
    check_tensor(x, "BF16", (2, 8))
    with pytest.raises(InvalidInputError, match="expected datatype BF16, got FP32"):
        check_tensor(x, "FP32", (2, 8))
    assert most_output_bytes(MethodSignature("forward", (x,), (logits,))) == 16
