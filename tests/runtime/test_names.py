"""Served tensor names: the program's own where they fit the method, positional otherwise."""

from __future__ import annotations

import torch

from pteforge.contracts.specs import ConstantInput
from pteforge.manager.signature import method_signature
from pteforge.runtime.metadata import MethodSignature, TensorNames, TensorSpec


def _positional(inputs: int, outputs: int) -> MethodSignature:
    return MethodSignature(
        "forward",
        tuple(TensorSpec(f"input_{i}", "float32", (2,)) for i in range(inputs)),
        tuple(TensorSpec(f"output_{i}", "float32", (2,)) for i in range(outputs)),
    )


def test_program_names_replace_positional_ones() -> None:
    named = _positional(2, 1).named(TensorNames(("input_ids", "attention_mask"), ("logits",)))
    assert [t.name for t in named.inputs] == ["input_ids", "attention_mask"]
    assert [t.name for t in named.outputs] == ["logits"]
    assert named.inputs[0].shape == (2,) and named.inputs[0].datatype == "FP32"


def test_names_that_do_not_fit_leave_positional_names() -> None:
    signature = _positional(2, 1)
    assert signature.named(None) == signature
    assert signature.named(TensorNames(("only_one",), ("logits",))).inputs == signature.inputs
    assert signature.named(TensorNames(("a", "a"), ("logits",))).inputs == signature.inputs
    assert signature.named(TensorNames(("a", ""), ("logits",))).inputs == signature.inputs
    assert signature.named(TensorNames(("a", "b"), ())).outputs == signature.outputs


class _Masked(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, input_ids: torch.Tensor, scale: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.steps.add_(1)
        return input_ids * scale + self.steps, input_ids.sum()


def test_method_signature_follows_the_graph_signature() -> None:
    """User inputs in order (a specialised int is a constant, in its place); mutated buffers
    are not outputs."""
    program = torch.export.export(_Masked(), (torch.randn(2, 4), 3))
    signature = method_signature("forward", program)
    assert [t.name for t in signature.inputs] == ["input_ids"]
    assert [t.dtype for t in signature.inputs] == ["float32"]
    assert signature.constants == (ConstantInput(1, "scale", 3),)
    assert len(signature.outputs) == 2
    assert signature.outputs[0].shape == (2, 4)
