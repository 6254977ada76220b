"""The XNNPACK pt2e recipes: upstream configuration, calibration on the given inputs."""

from __future__ import annotations

import math

import pytest
import torch
from torch.export import ExportedProgram
from torchao.quantization.pt2e.quantizer import Quantizer

from pteforge.backends import (
    BackendCatalogError,
    QuantizationError,
    XnnpackEntry,
    XnnpackPt2eRecipe,
    default_catalog,
)
from pteforge.backends.quantization import XNNPACK_PT2E_RECIPES
from tests.backends.harness import (
    assert_int8_close,
    lower_with_partitioner,
    run_pte,
    tiny_mlp,
    tiny_mlp_module,
)
from tests.models import MultiMethod

QUANTIZE_PER_TENSOR = torch.ops.quantized_decomposed.quantize_per_tensor


def input_scale(program: ExportedProgram) -> float:
    """The scale of the static quantize node applied to the program's input."""
    (placeholder,) = program.graph_signature.user_inputs
    for node in program.graph.nodes:
        if node.target == QUANTIZE_PER_TENSOR.default and node.args[0].name == placeholder:
            return float(node.args[1])
    raise AssertionError("no static quantize node on the input")


def targets(program: ExportedProgram) -> set[object]:
    return {node.target for node in program.graph.nodes if node.op == "call_function"}


def test_static_recipe_calibrates_on_the_given_inputs() -> None:
    model = tiny_mlp()
    (x,) = model.inputs["forward"]
    recipe = default_catalog().get_quantizer("xnnpack_pt2e_int8_static_per_channel")
    narrow = recipe.quantize(model.programs["forward"], [(x,)])
    wide = recipe.quantize(model.programs["forward"], [(x,), (x * 10,)])
    # Affine int8 over the observed range (which always includes zero).
    expected_narrow = (x.max().clamp(min=0) - x.min().clamp(max=0)).item() / 255
    assert input_scale(narrow) == pytest.approx(expected_narrow, rel=1e-3)
    assert input_scale(wide) == pytest.approx(10 * expected_narrow, rel=1e-3)


def test_dynamic_recipe_chooses_activation_qparams_at_run_time() -> None:
    model = tiny_mlp()
    recipe = default_catalog().get_quantizer("xnnpack_pt2e_int8_dynamic_per_channel")
    quantized = recipe.quantize(model.programs["forward"], [model.inputs["forward"]])
    assert torch.ops.quantized_decomposed.choose_qparams.tensor in targets(quantized)
    assert torch.ops.quantized_decomposed.dequantize_per_channel.default in targets(quantized)


def test_recipes_reuse_upstream_quantizer_configuration() -> None:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer

    for name, dynamic in [
        ("xnnpack_pt2e_int8_dynamic_per_channel", True),
        ("xnnpack_pt2e_int8_static_per_channel", False),
    ]:
        quantizer = XnnpackPt2eRecipe(name).quantizer(())
        assert isinstance(quantizer, XNNPACKQuantizer)
        config = quantizer.global_config
        assert config is not None and config.input_activation.is_dynamic is dynamic
        assert config.weight.qscheme == torch.per_channel_symmetric


def test_empty_calibration_is_an_error() -> None:
    model = tiny_mlp()
    recipe = default_catalog().get_quantizer("xnnpack_pt2e_int8_static_per_channel")
    with pytest.raises(QuantizationError, match="calibration"):
        recipe.quantize(model.programs["forward"], [])


def test_calibration_of_the_wrong_shape_is_translated() -> None:
    model = tiny_mlp()
    recipe = default_catalog().get_quantizer("xnnpack_pt2e_int8_static_per_channel")
    with pytest.raises(QuantizationError, match="xnnpack_pt2e_int8_static_per_channel"):
        recipe.quantize(model.programs["forward"], [(torch.randn(8, 5),)])


class _PassFailingRecipe(XnnpackPt2eRecipe):
    """Its quantizer fails as upstream's Arm one did on a ``_guards_fn``: a pass manager's
    error naming the pass, raised from the one that says why."""

    def quantizer(self, lowering: object) -> object:
        class Failing(Quantizer):
            def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
                try:
                    raise ValueError("call_module is not supported")
                except ValueError as reason:
                    raise RuntimeError("error in the 'DecomposeAdaptiveAvgPool2dPass'") from reason

            def validate(self, model: torch.fx.GraphModule) -> None:
                pass

        return Failing()


def test_a_wrapped_quantizer_failure_keeps_its_reason() -> None:
    """The error named only the pass that failed (an Ethos-U CNN's plan error); it now
    quotes the cause too, as lowering errors do."""
    recipe = _PassFailingRecipe("xnnpack_pt2e_int8_static_per_channel")
    model = tiny_mlp()
    with pytest.raises(QuantizationError) as raised:
        recipe.quantize(model.programs["forward"], [model.inputs["forward"]])
    message = str(raised.value)
    assert "DecomposeAdaptiveAvgPool2dPass" in message
    assert "<- caused by ValueError: call_module is not supported" in message


def test_unknown_recipe_name_lists_the_known_ones() -> None:
    with pytest.raises(BackendCatalogError, match="xnnpack_pt2e_int8_dynamic_per_channel"):
        XnnpackPt2eRecipe("xnnpack_int3")


def test_dynamic_batch_survives_quantization() -> None:
    model = tiny_mlp_module().eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    program = torch.export.export(model, (torch.randn(4, 32),), dynamic_shapes=({0: batch},))
    generator = torch.Generator().manual_seed(2)
    small, large = torch.randn(2, 32, generator=generator), torch.randn(9, 32, generator=generator)
    recipe = default_catalog().get_quantizer("xnnpack_pt2e_int8_static_per_channel")
    quantized = recipe.quantize(program, [(small,), (large,)])
    assert [r.upper for r in quantized.range_constraints.values()] == [16]
    pte = lower_with_partitioner(
        XnnpackEntry().partitioner(), MultiMethod({"forward": quantized}, {}, {})
    )
    for x in (small, large):
        (actual,) = run_pte(pte, "forward", (x,))
        assert_int8_close(actual, model(x).detach())


class _PositionIds(torch.nn.Module):
    """Integer arithmetic feeding an index, as transformers builds position ids."""

    def __init__(self) -> None:
        super().__init__()
        self.positions = torch.nn.Embedding(16, 8)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ids = torch.arange(x.shape[1]) * 2 + 1
        return self.proj(x + self.positions(ids))


@pytest.mark.parametrize("recipe", sorted(XNNPACK_PT2E_RECIPES))
def test_integer_arithmetic_survives_quantization(recipe: str) -> None:
    """Upstream's quantizer turns ``arange(n) * 2 + 1``'s scalars into float constants, and the
    embedding then refuses float indices; the recipe keeps integer nodes' scalars."""
    torch.manual_seed(0)
    model = _PositionIds().eval()
    x = torch.randn(1, 6, 8)
    program = torch.export.export(model, (x,))
    quantized = XnnpackPt2eRecipe(recipe).quantize(program, [(x,)])
    got = quantized.module()(x)
    expected = model(x)
    signal, noise = float(expected.pow(2).mean()), float((got - expected).pow(2).mean())
    assert 10 * math.log10(signal / noise) > 20.0  # int8 close to fp32, positions intact
