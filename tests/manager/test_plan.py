"""``parse_plan`` and what the manager derives from a plan: the plan format
(docs/http-api.md), its errors, each method's target (no lowering here)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import torch

from pteforge.contracts.plan import PartitionerSpec, PlanSpec, TargetSpec, VerifySpec
from pteforge.manager import PlanError, UnknownMethodError, parse_plan
from pteforge.manager.plan import calibration_tensors, resolve_targets


def test_parses_every_target_form() -> None:
    plan = parse_plan(
        {
            "all": {"partitioners": ["xnnpack"]},
            "methods": {
                "encode": {"partitioners": [{"name": "xnnpack", "options": {"per_op_mode": True}}]},
                "decode": {
                    "delegate": {
                        "backend_id": "XnnpackBackend",
                        "compile_specs": [
                            {"key": "k", "value_b64": base64.b64encode(b"v").decode()}
                        ],
                    }
                },
                "score": {},
                "quant": {
                    "partitioners": ["xnnpack"],
                    "quantize": "xnnpack_pt2e_int8_static_per_channel",
                    "calibration": [[{"dtype": "float32", "shape": [1, 2], "data": [1.0, 2.0]}]],
                },
            },
        }
    )
    targets = resolve_targets(plan, ["decode", "encode", "other", "quant", "score"])
    assert targets["encode"].partitioner_specs() == [
        PartitionerSpec(name="xnnpack", options={"per_op_mode": True})
    ]
    assert targets["decode"].delegate is not None
    assert targets["decode"].delegate.backend_id == "XnnpackBackend"
    assert targets["decode"].delegate.compile_specs[0].value() == b"v"
    assert targets["score"] == TargetSpec() and not targets["score"].delegated
    assert targets["other"].partitioner_specs() == [PartitionerSpec(name="xnnpack")]  # "all"
    assert targets["other"].delegated
    calibration = calibration_tensors("methods.quant", targets["quant"])
    assert calibration is not None
    assert torch.equal(calibration[0][0], torch.tensor([[1.0, 2.0]]))


def test_empty_plan_is_portable() -> None:
    assert resolve_targets(parse_plan(None), ["forward"]) == {"forward": TargetSpec()}
    assert resolve_targets(parse_plan({}), ["forward"]) == {"forward": TargetSpec()}
    assert calibration_tensors("all", TargetSpec()) is None


def test_program_wide_options() -> None:
    default = parse_plan({})
    assert not default.share_mutable_buffers
    assert default.tolerances == VerifySpec(rtol=1e-4, min_sqnr_db=20.0)
    plan = parse_plan({"share_mutable_buffers": True, "verify": {"min_sqnr_db": 30}})
    assert plan.share_mutable_buffers
    assert plan.tolerances == VerifySpec(rtol=1e-4, min_sqnr_db=30.0)
    assert parse_plan({"verify": {"rtol": 1e-3}}).tolerances.rtol == 1e-3


@pytest.mark.parametrize(
    ("plan", "field"),
    [
        ([], "plan"),
        ({"method": {}}, "method"),
        ({"methods": []}, "methods"),
        ({"all": {"partitioner": ["xnnpack"]}}, "all.partitioner"),
        ({"all": {"partitioners": "xnnpack"}}, "all.partitioners"),
        ({"all": {"partitioners": [3]}}, "all.partitioners[0]"),
        ({"all": {"partitioners": [{"name": "x", "opts": {}}]}}, "all.partitioners[0].opts"),
        ({"all": {"delegate": {"backend_id": "X", "extra": 1}}}, "all.delegate.extra"),
        ({"all": {"partitioners": ["xnnpack"], "delegate": {"backend_id": "X"}}}, "all"),
        ({"methods": {"m": {"delegate": {}}}}, "methods.m.delegate.backend_id"),
        (
            {"methods": {"m": {"delegate": {"backend_id": "X", "compile_specs": {}}}}},
            "methods.m.delegate.compile_specs",
        ),
        ({"all": {"quantize": 1}}, "all.quantize"),
        (
            {"all": {"calibration": [[{"shape": [-1], "data": [1]}]]}},
            "all.calibration[0][0].shape[0]",
        ),
        ({"share_mutable_buffers": "yes"}, "share_mutable_buffers"),
        ({"share_mutable_buffers": 1}, "share_mutable_buffers"),
        ({"verify": []}, "verify"),
        ({"verify": {"atol": 1e-3}}, "verify.atol"),
        ({"verify": {"rtol": True}}, "verify.rtol"),
        ({"verify": {"rtol": 0}}, "verify.rtol"),
        ({"verify": {"rtol": float("inf")}}, "verify.rtol"),
        ({"verify": {"min_sqnr_db": "20"}}, "verify.min_sqnr_db"),
    ],
)
def test_bad_fields_are_named(plan: Any, field: str) -> None:
    with pytest.raises(PlanError) as raised:
        parse_plan(plan)
    assert raised.value.field == field
    assert field in str(raised.value)


@pytest.mark.parametrize(
    ("tensor", "field"),
    [
        ({"dtype": "nope", "shape": [1], "data": [1]}, "all.calibration[0][0].dtype"),
        ({"shape": [3], "data": [1, 2]}, "all.calibration[0][0].data"),
    ],
)
def test_calibration_tensors_that_cannot_be_built_are_named(
    tensor: dict[str, Any], field: str
) -> None:
    target = parse_plan({"all": {"calibration": [[tensor]]}}).all
    assert target is not None
    with pytest.raises(PlanError) as raised:
        calibration_tensors("all", target)
    assert raised.value.field == field


def test_a_validated_spec_is_the_plan_itself() -> None:
    plan = {"all": {"partitioners": ["xnnpack"]}, "verify": {"rtol": 1e-3}}
    spec = PlanSpec.model_validate(plan)
    assert parse_plan(spec) is spec and parse_plan(plan) == spec


def test_unknown_method_names_known_methods() -> None:
    plan = parse_plan({"methods": {"encdoe": {}}})
    with pytest.raises(UnknownMethodError) as raised:
        resolve_targets(plan, ["decode", "encode"])
    assert raised.value.method == "encdoe"
    assert "decode, encode" in str(raised.value)
