"""The numerics check: each compiled method in the native runtime against the exported program."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from pteforge.backends import BackendCatalog
from pteforge.contracts.plan import VerifySpec
from pteforge.manager import CompiledProgram, compile_programs, output_error, verify_numerics
from pteforge.manager.bundle import bundled_program
from pteforge.manager.verify import ALL_ZERO_REFERENCE, NumericsCase
from tests.models import MultiMethod, small_mlp_programs

MIXED = {"methods": {"encode": {"partitioners": ["xnnpack"]}, "decode": {}}}
INT8 = {"all": {"partitioners": ["xnnpack"], "quantize": "xnnpack_pt2e_int8_dynamic_per_channel"}}


@pytest.fixture(scope="module")
def mixed(seq2seq: MultiMethod, catalog: BackendCatalog) -> CompiledProgram:
    return compile_programs(seq2seq.programs, MIXED, catalog)


def test_output_error_metrics() -> None:
    reference = torch.tensor([1.0, -2.0, 4.0])
    error = output_error(reference + torch.tensor([0.0, 0.0, 0.04]), reference)
    assert error["max_abs_error"] == pytest.approx(0.04)
    assert error["max_rel_error"] == pytest.approx(0.01)  # normwise: 0.04 / max |b|
    assert error["sqnr_db"] == pytest.approx(10 * math.log10(21 / 0.04**2))
    assert error["exact"] is False


def test_sqnr_of_outputs_below_float32s_smallest_normal() -> None:
    """A MobileNetV2 with transformers' initialisation has logits near 5e-25, whose squares
    sum below float32's smallest normal: the signal was floored there, so an int8 answer
    of all zeros (max_rel_error 1.0) measured 104 dB and passed the 20 dB check."""
    reference = torch.tensor([5e-25, -3e-25, 4e-25])
    assert output_error(torch.zeros(3), reference)["sqnr_db"] == pytest.approx(0.0)
    error = output_error(reference * 1.01, reference)
    assert error["sqnr_db"] == pytest.approx(40.0)
    assert output_error(torch.tensor([0.0, 1e-3]), torch.zeros(2))["sqnr_db"] is None


def test_exact_outputs_have_no_finite_sqnr() -> None:
    reference = torch.tensor([[1.0, float("nan")], [float("-inf"), 0.0]])
    error = output_error(reference.clone(), reference)
    assert error == {"max_abs_error": 0.0, "max_rel_error": 0.0, "sqnr_db": None, "exact": True}
    ids = torch.tensor([3, 1, 4])
    assert output_error(ids.clone(), ids)["exact"] is True


def test_non_finite_mismatch_and_zero_reference() -> None:
    reference = torch.tensor([1.0, 2.0])
    error = output_error(torch.tensor([1.0, float("nan")]), reference)
    assert error["max_abs_error"] is None and error["max_rel_error"] is None
    assert error["exact"] is False
    zeros = output_error(torch.tensor([0.0, 1e-3]), torch.zeros(2))
    assert zeros["max_abs_error"] == pytest.approx(1e-3)
    assert zeros["max_rel_error"] is not None and zeros["max_rel_error"] > 1e30


def test_numerics_cases_bundle_into_a_program_executorch_verifies(
    seq2seq: MultiMethod, mixed: CompiledProgram, tmp_path: Path
) -> None:
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    cases: dict[str, NumericsCase] = {}
    verify_numerics(seq2seq.programs, mixed, cases)
    assert set(cases) == {"encode", "decode"}
    mixed.write(tmp_path / "mixed.pte")
    data = bundled_program(tmp_path / "mixed.pte", cases)
    assert data is not None
    bundle = _load_bundled_program_from_buffer(data)
    for method in cases:
        bundle.verify_result_with_bundled_expected_output(method, 0, 1e-3, 1e-4)
    assert bundled_program(tmp_path / "mixed.pte", {}) is None


def test_fp32_plan_passes_on_example_inputs(seq2seq: MultiMethod, mixed: CompiledProgram) -> None:
    numerics = verify_numerics(seq2seq.programs, mixed)
    assert numerics["status"] == "passed" and numerics["flagged"] is False
    assert numerics["tolerance"] == {"rtol": 1e-4, "min_sqnr_db": 20.0}
    assert set(numerics["methods"]) == {"encode", "decode"}
    for method, record in numerics["methods"].items():
        assert record["status"] == "passed", record
        assert record["inputs"] == "example"
        assert record["check"] == {"metric": "max_rel_error", "limit": 1e-4}
        names = [spec.name for spec in mixed.methods[method].outputs]
        assert [output["name"] for output in record["outputs"]] == names
        for output in record["outputs"]:
            assert output["within_tolerance"]
            assert output["max_rel_error"] <= 1e-4 and output["sqnr_db"] > 60


def test_over_tolerance_is_flagged(seq2seq: MultiMethod, mixed: CompiledProgram) -> None:
    strict_plan = mixed.plan.model_copy(update={"verify": VerifySpec(rtol=1e-15)})
    strict = dataclasses.replace(mixed, plan=strict_plan)
    numerics = verify_numerics(seq2seq.programs, strict)
    assert numerics["status"] == "over_tolerance" and numerics["flagged"] is True
    record = numerics["methods"]["encode"]
    assert record["status"] == "over_tolerance"
    assert not record["outputs"][0]["within_tolerance"]


def test_inputs_are_generated_where_the_program_keeps_none(catalog: BackendCatalog) -> None:
    model = small_mlp_programs()
    program = model.programs["forward"]
    compiled = compile_programs(model.programs, {}, catalog)
    program.example_inputs = None
    numerics = verify_numerics(model.programs, compiled)
    record = numerics["methods"]["forward"]
    assert record["inputs"] == "generated"
    assert record["status"] == "passed", record


def test_a_check_against_all_zero_outputs_says_it_compared_nothing(
    catalog: BackendCatalog,
) -> None:
    """A language model exported on pad ids alone gave all-zero logits: its int8 artifact
    passed as exact though it differed by 0.0086 on real prompts (new-user pass 10)."""

    class Dead(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(-torch.abs(x))

    programs = {"forward": torch.export.export(Dead(), (torch.randn(2, 3),))}
    numerics = verify_numerics(programs, compile_programs(programs, {}, catalog))
    record = numerics["methods"]["forward"]
    assert (record["status"], record["message"]) == ("passed", ALL_ZERO_REFERENCE)
    live = small_mlp_programs().programs
    passed = verify_numerics(live, compile_programs(live, {}, catalog))["methods"]["forward"]
    assert passed["status"] == "passed" and "message" not in passed


class SplitHeads(torch.nn.Module):
    """LeViT's attention in small: a split along the last dimension of a batched input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        query, _ = x.split([2, 6], dim=2)
        return query + 1


def test_a_dynamic_batch_lowering_fixes_is_shown_fixed_and_said(catalog: BackendCatalog) -> None:
    """ExecuTorch's to_edge fixes the batch of a split's input at the example's size: a LeViT
    exported with Dim("batch", max=8) claimed 1..8 on /v1 and /v2, then crashed XNNPACK at
    batch 1 and was refused at 3 with the planned bound alone (new-user pass 13)."""
    batch = torch.export.Dim("batch", min=1, max=8)
    program = torch.export.export(
        SplitHeads(), (torch.randn(2, 3, 8),), dynamic_shapes=({0: batch},)
    )
    compiled = compile_programs({"forward": program}, {}, catalog)
    method = compiled.methods["forward"]
    assert [(d.axis, d.min, d.max) for d in method.inputs[0].dynamic_dims or ()] == [(0, 2, 2)]
    assert [(d.min, d.max) for d in method.outputs[0].dynamic_dims or ()] == [(2, 2)]
    record = verify_numerics({"forward": program}, compiled)["methods"]["forward"]
    assert record["status"] == "passed"
    assert record["message"].startswith(
        "input 'x' dimension 0, exported dynamic, was fixed at 2 by lowering: the .pte takes"
    )


def test_int8_reports_sqnr_against_the_threshold(catalog: BackendCatalog) -> None:
    model = small_mlp_programs()
    compiled = compile_programs(model.programs, INT8, catalog)
    record = verify_numerics(model.programs, compiled)["methods"]["forward"]
    assert record["check"] == {"metric": "sqnr_db", "limit": 20.0}
    assert record["status"] == "passed", record
    (output,) = record["outputs"]
    assert 20.0 <= output["sqnr_db"] < 100.0
    strict = compile_programs(model.programs, {**INT8, "verify": {"min_sqnr_db": 100}}, catalog)
    numerics = verify_numerics(model.programs, strict)
    assert numerics["status"] == "over_tolerance" and numerics["flagged"]


def test_coreml_says_it_cannot_execute_here(catalog: BackendCatalog) -> None:
    model = small_mlp_programs()
    compiled = compile_programs(model.programs, {"all": {"partitioners": ["coreml"]}}, catalog)
    numerics = verify_numerics(model.programs, compiled)
    assert numerics["status"] == "not_executable" and numerics["flagged"] is False
    record = numerics["methods"]["forward"]
    assert record["status"] == "not_executable"
    assert "CoreMLBackend" in record["message"] and "outputs" not in record


def test_a_pte_that_does_not_run_is_an_error(seq2seq: MultiMethod, mixed: CompiledProgram) -> None:
    broken = dataclasses.replace(mixed, pte=b"not a program")
    numerics = verify_numerics(seq2seq.programs, broken)
    assert numerics["status"] == "error" and numerics["flagged"] is True
    assert all(r["status"] == "error" and r["message"] for r in numerics["methods"].values())
    named = "error: 0x12 (InvalidArgument)"  # the code and its name
    assert all(named in r["message"] for r in numerics["methods"].values())


def test_a_method_that_fails_in_a_delegate_says_what_the_runtime_logged(
    catalog: BackendCatalog,
) -> None:
    """EfficientNet's stem (asymmetric zero padding, then a stride-2 convolution) lowers to
    XNNPACK int8 but fails at execute; the bindings say only 'error 0x1', ExecuTorch's log
    names the delegate and why (upstream XNNPACK, executorch 1.5.1)."""
    stem = torch.nn.Sequential(torch.nn.ZeroPad2d((0, 1, 0, 1)), torch.nn.Conv2d(3, 8, 3, 2))
    program = torch.export.export(stem.eval(), (torch.randn(1, 3, 16, 16),))
    compiled = compile_programs({"forward": program}, INT8, catalog)
    record = verify_numerics({"forward": program}, compiled)["methods"]["forward"]
    assert record["status"] == "error" and "0x01 (Internal)" in record["message"]
    assert "runtime log:" in record["message"] and "XNNExecutor" in record["message"]


def test_a_half_precision_method_is_judged_on_its_formats_epsilon(
    catalog: BackendCatalog,
) -> None:
    """A float16 method's rounding alone goes past the fp32 default of 1e-4 (here 3e-3, as
    in-process ExecuTorch gives), so every one was flagged: unless the plan sets ``rtol``,
    the limit is ten float16 epsilons."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 16)]
    model = torch.nn.Sequential(*layers).half()
    programs = {"forward": torch.export.export(model, (torch.randn(4, 64).half(),))}
    record = verify_numerics(programs, compile_programs(programs, {}, catalog))["methods"]
    check, (output,) = record["forward"]["check"], record["forward"]["outputs"]
    assert check == {"metric": "max_rel_error", "limit": 10 * torch.finfo(torch.float16).eps}
    assert 1e-4 < output["max_rel_error"] < check["limit"], output
    assert record["forward"]["status"] == "passed"
    strict = compile_programs(programs, {"verify": {"rtol": 1e-4}}, catalog)
    numerics = verify_numerics(programs, strict)
    assert numerics["methods"]["forward"]["check"]["limit"] == 1e-4
    assert numerics["status"] == "over_tolerance"
