"""Arm Ethos-U, compile-only: its options, its int8 recipe, and the plans it refuses.

The entry and its recipe also pass the shared suite of ``test_entries.py`` (lowered, delegated
to EthosUBackend, refused by the runtime here); this file covers what is particular to them.
"""

from __future__ import annotations

import pytest
import torch

from pteforge.backends import ETHOS_U_RECIPE, BackendCatalog, EthosUOptions, InvalidOptionsError
from pteforge.backends.quantization import Pt2eRecipe
from pteforge.contracts.plan import PartitionerSpec
from pteforge.manager import LoweringError, compile_programs, verify_numerics
from pteforge.manager.errors import PlanError
from tests.backends.harness import delegated_backends, tiny_mlp


def test_target_defaults_to_u55_128_and_takes_only_ethos_u_configurations(
    catalog: BackendCatalog,
) -> None:
    entry = catalog.get_partitioner("ethos-u")
    assert entry.validate({}) == EthosUOptions(target="ethos-u55-128")
    assert entry.validate({"target": "ethos-u85-256"}).target == "ethos-u85-256"
    with pytest.raises(InvalidOptionsError, match=r"'ethos-u'.*target"):
        entry.validate({"target": "ethos-u95-128"})
    assert entry.can_execute() is False
    assert "Compile-only" in entry.description and ETHOS_U_RECIPE in entry.description


def test_a_float_program_is_refused_naming_the_method_backend_and_recipe(
    catalog: BackendCatalog,
) -> None:
    """Not a silent fp32 .pte with nothing delegated: the lowering error says what to add."""
    model = tiny_mlp()
    with pytest.raises(LoweringError) as raised:
        compile_programs(model.programs, {"all": {"partitioners": ["ethos-u"]}}, catalog)
    error = raised.value
    assert (error.method, error.backend_id) == ("forward", "EthosUBackend")
    assert f'add "quantize": "{ETHOS_U_RECIPE}"' in str(error)


def test_an_xnnpack_recipe_is_refused_by_the_plan_check(catalog: BackendCatalog) -> None:
    model = tiny_mlp()
    recipe = "xnnpack_pt2e_int8_static_per_channel"
    plan = {"all": {"partitioners": ["ethos-u"], "quantize": recipe}}
    with pytest.raises(PlanError) as refused:
        compile_programs(model.programs, plan, catalog)
    assert refused.value.field == "all.quantize"
    assert f"quantize with {ETHOS_U_RECIPE!r}" in str(refused.value)


def test_int8_plan_compiles_for_u85_quietly_and_is_not_executable(
    catalog: BackendCatalog, capsys: pytest.CaptureFixture[str]
) -> None:
    """Vela's report pages stay out of stdout (the job log); the numerics check names the
    backend this host cannot execute."""
    model = tiny_mlp()
    u85 = {"name": "ethos-u", "options": {"target": "ethos-u85-256"}}
    plan = {"all": {"partitioners": [u85], "quantize": ETHOS_U_RECIPE}}
    compiled = compile_programs(model.programs, plan, catalog)
    assert "Network summary" not in capsys.readouterr().out
    assert delegated_backends(compiled.pte) == ["EthosUBackend"]
    record = verify_numerics(model.programs, compiled)["methods"]["forward"]
    assert record["status"] == "not_executable"
    assert "EthosUBackend" in record["message"]


def test_the_recipe_annotates_for_the_partitioners_target(catalog: BackendCatalog) -> None:
    """It annotated for U55, whose TOSA profile lacks operators U65/U85 take, whatever the
    method's target; it now reads the target from the method's ethos-u partitioner."""
    recipe = catalog.get_quantizer(ETHOS_U_RECIPE)
    assert isinstance(recipe, Pt2eRecipe)
    u85 = [PartitionerSpec(name="ethos-u", options={"target": "ethos-u85-256"})]

    def profile(lowering: list[PartitionerSpec]) -> str:
        return str(recipe.quantizer(lowering).quantizer.tosa_spec)  # upstream's EthosUQuantizer

    assert (
        profile([]) == profile([PartitionerSpec(name="ethos-u")]) == "TOSA-1.0+INT+int16+int4+u55"
    )
    assert profile(u85) == "TOSA-1.0+INT+int16+int4+cf"


class _PooledConv(torch.nn.Module):
    """A CNN classifier's tail: conv, hardswish, global average pool, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, 2, 1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.hardswish(self.conv(x))
        return self.head(torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))  # type: ignore[no-any-return]


def test_the_recipe_quantizes_a_global_average_pool(catalog: BackendCatalog) -> None:
    """The recipe quantized ``ExportedProgram.module()``, whose ``_guards_fn`` call_module
    upstream's Arm passes refuse ("call_module is not supported", in
    DecomposeAdaptiveAvgPool2dPass): a plain CNN failed with an invalid_plan error. Upstream's
    flow quantizes ``module(check_guards=False)``, and so does the recipe now."""
    program = torch.export.export(_PooledConv().eval(), (torch.randn(1, 3, 16, 16),))
    plan = {"all": {"partitioners": ["ethos-u"], "quantize": ETHOS_U_RECIPE}}
    compiled = compile_programs({"forward": program}, plan, catalog)
    assert delegated_backends(compiled.pte) == ["EthosUBackend"]
