"""The flows of lowering-a-model-as-a-delegate.md and xnnpack-lowering-tutorial.md.

Each runs through ``pteforge.manager`` and the resulting ``.pte`` runs in
``executorch.runtime`` against eager PyTorch.
"""

from __future__ import annotations

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from executorch.exir import EdgeCompileConfig
from torch import nn
from torch.export import export
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from pteforge.manager import DelegationSpec, to_edge
from tests.manager.helpers import run_method


class LowerableSubModel(nn.Module):
    """Flow 1's submodule (``sin`` is not XNNPACK's, so this one squares and scales)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * x + 0.5


class NonLowerableSubModel(nn.Module):
    def __init__(self, bias: torch.Tensor) -> None:
        super().__init__()
        self.bias = bias

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.add(torch.add(a, b), self.bias)


class CompositeModel(nn.Module):
    def __init__(self, lowerable: nn.Module, returns_tuple: bool) -> None:
        super().__init__()
        self.non_lowerable = NonLowerableSubModel(torch.ones(1) * 0.3)
        self.lowerable = lowerable
        self.returns_tuple = returns_tuple

    def _lowerable(self, x: torch.Tensor) -> torch.Tensor:
        out = self.lowerable(x)
        # A LoweredBackendModule returns a tuple of outputs even for one output.
        return out[0] if self.returns_tuple else out  # type: ignore[no-any-return]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = self._lowerable(x)
        b = self._lowerable(a)
        ret = self.non_lowerable(a, b)
        return a, b, ret


class ArithmeticModel(nn.Module):
    """Flow 3's model."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x + y
        x = x * y
        x = x - y
        x = x / y
        x = x * y
        return x + y


class TinyConvNet(nn.Module):
    """A MobileNet-shaped stand-in for the tutorial's mobilenet_v2 (no downloads here)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(x))
        x = torch.relu(self.depthwise(x)) + x
        return self.fc(x.mean(dim=(2, 3)))  # type: ignore[no-any-return]


def _assert_close(got: list[torch.Tensor], expected: tuple[torch.Tensor, ...]) -> None:
    assert len(got) == len(expected)
    for out, ref in zip(got, expected, strict=True):
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def lowered_submodule() -> nn.Module:
    example = (torch.randn(4),)
    edge = to_edge(export(LowerableSubModel(), example))
    (lowered,) = edge.to_backend(DelegationSpec("XnnpackBackend", [])).lowered_modules()
    return lowered


def test_flow1_whole_module_buffer_runs(lowered_submodule: nn.Module) -> None:
    x = torch.randn(4)
    got = run_method(lowered_submodule.buffer(), "forward", [x])  # type: ignore[operator]
    _assert_close(got, (LowerableSubModel()(x),))


def test_flow2_lowered_module_composes(lowered_submodule: nn.Module) -> None:
    x = torch.randn(4)
    composite = CompositeModel(lowered_submodule, returns_tuple=True)
    pte = to_edge(export(composite, (x,))).to_executorch().buffer
    with torch.no_grad():
        expected = CompositeModel(LowerableSubModel(), returns_tuple=False)(x)
    _assert_close(run_method(pte, "forward", [x]), expected)


def test_flow3_partitioner_lowering() -> None:
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3), torch.rand(1, 3) + 0.5)
    lowered = to_edge(export(ArithmeticModel(), inputs)).to_backend(XnnpackPartitioner())
    report = lowered.report()["methods"]["forward"]
    assert report["backends"]["XnnpackBackend"]["delegated_operators"] == 6
    pte = lowered.to_executorch().buffer
    _assert_close(run_method(pte, "forward", list(inputs)), (ArithmeticModel()(*inputs),))


def test_xnnpack_fp32_tutorial_flow() -> None:
    torch.manual_seed(0)
    model = TinyConvNet().eval()
    sample = (torch.randn(1, 3, 16, 16),)
    edge = to_edge(export(model, sample)).to_backend(XnnpackPartitioner())
    assert edge.report()["methods"]["forward"]["backends"]["XnnpackBackend"]["delegated_operators"]
    got = run_method(edge.to_executorch().buffer, "forward", list(sample))
    torch.testing.assert_close(got[0], model(*sample), atol=1e-4, rtol=1e-4)


def test_xnnpack_int8_quantized_tutorial_flow() -> None:
    torch.manual_seed(0)
    model = TinyConvNet().eval()
    sample = (torch.randn(1, 3, 16, 16),)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(export(model, sample).module(), quantizer)
    for _ in range(4):
        prepared(torch.randn(1, 3, 16, 16))
    prepared(*sample)
    quantized = convert_pt2e(prepared)
    edge = to_edge(
        export(quantized, sample), compile_config=EdgeCompileConfig(_check_ir_validity=False)
    ).to_backend(XnnpackPartitioner())
    operators = edge.report()["methods"]["forward"]["operators"]
    assert any("quantize" in op and n["delegated"] for op, n in operators.items())
    got = run_method(edge.to_executorch().buffer, "forward", list(sample))[0]
    expected = model(*sample)
    # int8: errors of a few quantization steps of the output range
    tolerance = 0.05 * float(expected.abs().max())
    assert float((got - expected).abs().max()) <= tolerance
    torch.testing.assert_close(got, quantized(*sample), atol=tolerance / 2, rtol=0.0)
