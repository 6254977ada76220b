"""``Plan.parse``: the plan format (docs/http-api.md) and its errors (no lowering here)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import torch

from pteforge.contracts.plan import PlanSpec
from pteforge.manager import (
    PartitionerRef,
    Plan,
    PlanError,
    Target,
    UnknownMethodError,
    VerifySettings,
)


def test_parses_every_target_form() -> None:
    plan = Plan.parse(
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
    targets = plan.resolve(["decode", "encode", "other", "quant", "score"])
    assert targets["encode"].partitioners == (PartitionerRef("xnnpack", {"per_op_mode": True}),)
    assert targets["decode"].delegate is not None
    assert targets["decode"].delegate["backend_id"] == "XnnpackBackend"
    assert targets["score"] == Target() and not targets["score"].delegated
    assert targets["other"].partitioners == (PartitionerRef("xnnpack"),)  # from "all"
    calibration = targets["quant"].calibration
    assert calibration is not None
    assert torch.equal(calibration[0][0], torch.tensor([[1.0, 2.0]]))


def test_empty_plan_is_portable() -> None:
    assert Plan.parse(None).resolve(["forward"]) == {"forward": Target()}
    assert Plan.parse({}).resolve(["forward"]) == {"forward": Target()}


def test_program_wide_options() -> None:
    default = Plan.parse({})
    assert not default.share_mutable_buffers
    assert default.verify == VerifySettings(rtol=1e-4, min_sqnr_db=20.0)
    plan = Plan.parse({"share_mutable_buffers": True, "verify": {"min_sqnr_db": 30}})
    assert plan.share_mutable_buffers
    assert plan.verify == VerifySettings(rtol=1e-4, min_sqnr_db=30.0)
    assert Plan.parse({"verify": {"rtol": 1e-3}}).verify.rtol == 1e-3


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
            {"all": {"calibration": [[{"dtype": "nope", "shape": [1], "data": [1]}]]}},
            "all.calibration[0][0].dtype",
        ),
        (
            {"all": {"calibration": [[{"shape": [3], "data": [1, 2]}]]}},
            "all.calibration[0][0].data",
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
        Plan.parse(plan)
    assert raised.value.field == field
    assert field in str(raised.value)


def test_parses_a_validated_spec_as_its_json() -> None:
    plan = {"all": {"partitioners": ["xnnpack"]}, "verify": {"rtol": 1e-3}}
    assert Plan.parse(PlanSpec.model_validate(plan)) == Plan.parse(plan)


def test_unknown_method_names_known_methods() -> None:
    plan = Plan.parse({"methods": {"encdoe": {}}})
    with pytest.raises(UnknownMethodError) as raised:
        plan.resolve(["decode", "encode"])
    assert raised.value.method == "encdoe"
    assert "decode, encode" in str(raised.value)
