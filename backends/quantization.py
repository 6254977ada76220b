"""Int8 pt2e quantization recipes: upstream's XNNPACK recipes by their names, and the
Ethos-U one (upstream's ``EthosUQuantizer``).

The catalog (and so the HTTP process) imports this module for the recipes' names; torch is
imported only by the functions that quantize, in the lowering process."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pteforge.backends.entry import QuantizerEntryBase
from pteforge.backends.errors import BackendCatalogError
from pteforge.backends.ethos_u import (
    ETHOS_U_BACKEND_ID,
    ETHOS_U_RECIPE,
    ethos_u_compile_spec,
    ethos_u_target,
)
from pteforge.backends.xnnpack import XNNPACK_BACKEND_ID
from pteforge.contracts.et_errors import described

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram

    from pteforge.contracts.plan import PartitionerSpec

# Upstream names (executorch.backends.xnnpack.recipes.XNNPackRecipeType) of the pt2e recipes.
XNNPACK_PT2E_RECIPES: dict[str, str] = {
    "xnnpack_pt2e_int8_dynamic_per_channel": "int8 dynamic activations, per-channel weights; "
    "no calibration needed (inputs are still run once to trace observers).",
    "xnnpack_pt2e_int8_static_per_channel": "int8 static activations calibrated on the given "
    "inputs, per-channel weights.",
    "xnnpack_pt2e_int8_static_per_tensor": "int8 static activations calibrated on the given "
    "inputs, per-tensor weights.",
}


class QuantizationError(BackendCatalogError):
    """A quantization recipe could not be applied to a program."""


class Pt2eRecipe(QuantizerEntryBase):
    """prepare_pt2e -> calibrate -> convert_pt2e -> re-export, with :meth:`quantizer`."""

    check_guards = True
    """Whether the graph module quantized keeps torch.export's ``_guards_fn`` submodule
    (``ExportedProgram.module(check_guards=...)``), as the backend's upstream flow does."""

    def quantize(
        self,
        program: ExportedProgram,
        calibration: Sequence[tuple[torch.Tensor, ...]],
        lowering: Sequence[PartitionerSpec] = (),
    ) -> ExportedProgram:
        """The program quantized by this recipe for ``lowering``, observers calibrated on
        ``calibration``."""
        import torch
        from executorch.backends.transforms.duplicate_dynamic_quant_chain import (
            DuplicateDynamicQuantChainPass,
        )
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        if not calibration:
            raise QuantizationError(f"{self.name}: needs at least one calibration input tuple")
        quantizer = self.quantizer(lowering)
        try:
            prepared = prepare_pt2e(program.module(check_guards=self.check_guards), quantizer)
            for inputs in calibration:
                prepared(*inputs)
            converted = convert_pt2e(prepared)
            # As upstream's LLM export does: a dynamic quant chain shared by several linears
            # (q/k/v) would otherwise join partitions into a dependency cycle at lowering.
            DuplicateDynamicQuantChainPass()(converted)
            return torch.export.export(
                converted,
                _example_args(program, calibration),
                dynamic_shapes=dynamic_shapes_of(program),
            )
        except Exception as error:  # torch/torchao raise many kinds; translate at the boundary
            # described: an upstream pass manager's error says which pass, its cause why
            message = f"{self.name}: quantization failed: {described(error)}"
            raise QuantizationError(message) from error

    @abc.abstractmethod
    def quantizer(self, lowering: Sequence[PartitionerSpec]) -> Any:
        """The upstream pt2e ``Quantizer`` this recipe annotates with, for ``lowering``."""


class XnnpackPt2eRecipe(Pt2eRecipe):
    """An XNNPACK pt2e recipe with upstream's XNNPACKQuantizer configuration."""

    backend_id = XNNPACK_BACKEND_ID

    def __init__(self, recipe: str) -> None:
        if recipe not in XNNPACK_PT2E_RECIPES:
            raise BackendCatalogError(
                f"unknown XNNPACK pt2e recipe {recipe!r}; known: {', '.join(XNNPACK_PT2E_RECIPES)}"
            )
        self.name = recipe
        self.description = XNNPACK_PT2E_RECIPES[recipe]

    def quantizer(self, lowering: Sequence[PartitionerSpec]) -> Any:
        """Upstream's quantizer for this recipe (``XNNPACKRecipeProvider``'s configuration;
        the same for every XNNPACK option)."""
        from executorch.backends.xnnpack.recipes import XNNPACKRecipeProvider, XNNPackRecipeType

        recipe = XNNPACKRecipeProvider().create_recipe(XNNPackRecipeType(self.name))
        if recipe is None or recipe.quantization_recipe is None:
            raise QuantizationError(f"upstream has no quantization recipe {self.name!r}")
        quantizers = recipe.quantization_recipe.quantizers or []
        if len(quantizers) != 1:
            raise QuantizationError(f"{self.name}: expected one upstream quantizer")
        return _integer_arithmetic_kept(quantizers[0])


class EthosUInt8Recipe(Pt2eRecipe):
    """The int8 recipe of the ``ethos-u`` entry: upstream's ``EthosUQuantizer`` with its
    symmetric configuration (static activations calibrated on the given inputs, per-channel
    weights), annotated for the TOSA profile of the ``ethos-u`` partitioner's target (the
    U55 one, with fewer operators, where the method names none)."""

    backend_id = ETHOS_U_BACKEND_ID
    name = ETHOS_U_RECIPE
    # Upstream's Ethos-U flow quantizes ``module(check_guards=False)``: its annotation passes
    # refuse the ``_guards_fn`` call_module ("call_module is not supported", first met in
    # DecomposeAdaptiveAvgPool2dPass, so every CNN with a global average pool failed).
    check_guards = False
    description = (
        "int8 for the ethos-u entry (EthosUQuantizer, symmetric): static activations "
        "calibrated on the given inputs, per-channel weights."
    )

    def quantizer(self, lowering: Sequence[PartitionerSpec]) -> Any:
        """``EthosUQuantizer`` for the target of ``lowering``'s ``ethos-u`` partitioner, with
        ``get_symmetric_quantization_config()`` set globally."""
        from executorch.backends.arm.quantizer import (
            EthosUQuantizer,
            get_symmetric_quantization_config,
        )

        quantizer = EthosUQuantizer(ethos_u_compile_spec(ethos_u_target(lowering)))
        quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
        return quantizer


def _integer_arithmetic_kept(quantizer: Any) -> Any:
    """``quantizer`` whose pre-annotation transform leaves integer ``add``/``mul`` alone.

    Upstream's XNNPACK quantizer turns every scalar operand of ``add``/``mul`` into a float
    tensor constant, integer arithmetic included: ``arange(n) + 1`` for position ids becomes
    a float, and the index it feeds fails (``tensors used as indices must be long``), which
    refused every transformers text model. The scalars of integer nodes are put back.
    """
    upstream = quantizer.transform_for_annotation

    def transform(model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        model = upstream(model)
        _restore_integer_scalars(model)
        return model

    quantizer.transform_for_annotation = transform
    return quantizer


def _restore_integer_scalars(model: torch.fx.GraphModule) -> None:
    import torch

    scalar_ops = (torch.ops.aten.add.Tensor, torch.ops.aten.mul.Tensor)
    replaced: set[torch.fx.Node] = set()
    for node in list(model.graph.nodes):
        value = node.meta.get("val")
        if node.target not in scalar_ops or value is None or value.dtype.is_floating_point:
            continue
        args = tuple(_scalar_back(model, arg) for arg in node.args)
        replaced |= {a for a, b in zip(node.args, args, strict=True) if a is not b}
        node.args = args
    for attr in replaced:
        if not attr.users:
            model.graph.erase_node(attr)
    model.recompile()


def _scalar_back(model: torch.fx.GraphModule, arg: Any) -> Any:
    """The integer scalar an upstream ``_tensor_constant_*`` attribute replaced, else ``arg``."""
    import torch

    if not (isinstance(arg, torch.fx.Node) and arg.op == "get_attr"):
        return arg
    if not str(arg.target).startswith("_tensor_constant_"):
        return arg
    constant = getattr(model, str(arg.target))
    if constant.dim() != 0 or not float(constant).is_integer():
        return arg
    return int(constant)


def _example_args(
    program: ExportedProgram, calibration: Sequence[tuple[torch.Tensor, ...]]
) -> tuple[Any, ...]:
    """The program's own example inputs when it kept them, else the first calibration tuple."""
    example = getattr(program, "example_inputs", None)
    if example is not None and not example[1]:
        return tuple(example[0])
    return tuple(calibration[0])


def dynamic_shapes_of(program: ExportedProgram) -> tuple[dict[int, Any] | None, ...] | None:
    """``dynamic_shapes`` that re-export ``program``'s flat tensor inputs with the same ranges.

    ``None`` when every input dimension is static.
    """
    names = set(program.graph_signature.user_inputs)
    inputs = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in names]
    shapes = tuple(_dynamic_dims(program, node.meta.get("val")) for node in inputs)
    return shapes if any(shapes) else None


def _dynamic_dims(program: ExportedProgram, value: object) -> dict[int, Any] | None:
    import torch
    from torch.export import Dim

    dims: dict[int, Any] = {}
    for index, size in enumerate(getattr(value, "shape", ())):
        if isinstance(size, torch.SymInt):
            bounds = program.range_constraints.get(size.node.expr)
            low = None if bounds is None else _finite(bounds.lower)
            high = None if bounds is None else _finite(bounds.upper)
            dims[index] = Dim.DYNAMIC(min=low, max=high)
    return dims or None


def _finite(bound: Any) -> int | None:
    try:
        return int(bound)
    except (TypeError, OverflowError, ValueError):
        return None
