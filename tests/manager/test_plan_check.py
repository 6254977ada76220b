"""Plans are checked before any work: every name, as written, called by what it is."""

from __future__ import annotations

from typing import Any

import pytest

from pteforge.backends import default_catalog
from pteforge.manager.errors import PlanError, UnknownMethodError
from pteforge.manager.plan import parse_plan
from pteforge.manager.plan_check import check_plan

METHODS = ["decode", "encode"]


def _check(plan: Any) -> None:
    check_plan(parse_plan(plan), METHODS, default_catalog())


@pytest.mark.parametrize(
    ("plan", "field", "words"),
    [
        ({"al": {"partitioners": ["xnnpack"]}}, "al", "unknown field"),
        ({"bogus": 1}, "bogus", "unknown field"),
        ({"all": {"partitioners": ["nope"]}}, "all.partitioners[0]", "unknown partitioner 'nope'"),
        (
            {"all": {"delegate": {"backend_id": "NoSuchBackend"}}},
            "all.delegate.backend_id",
            "unknown backend id 'NoSuchBackend'; registered backend ids: ",
        ),
        ({"all": {"quantize": "nope"}}, "all.quantize", "unknown quantization recipe 'nope'"),
        (
            {"all": {"partitioners": ["xnnpack_pt2e_int8_dynamic_per_channel"]}},
            "all.partitioners[0]",
            "is a quantizer entry, not a partitioner",
        ),
        ({"all": {"quantize": "xnnpack"}}, "all.quantize", "not a quantization recipe"),
        (
            {"methods": {"encode": {"partitioners": ["nope"]}}},
            "methods.encode.partitioners[0]",
            "unknown partitioner",
        ),
        (
            {"all": {"partitioners": [{"name": "xnnpack", "options": {"bogus": 1}}]}},
            "all.partitioners[0].options",
            "bogus",
        ),
        (
            {
                "all": {
                    "partitioners": ["openvino"],
                    "quantize": "xnnpack_pt2e_int8_dynamic_per_channel",
                }
            },
            "all.quantize",
            "all.partitioners[0] is 'openvino': the openvino entry lowers fp32 programs only",
        ),
        (
            {
                "methods": {
                    "encode": {"calibration": [[{"dtype": "nope", "shape": [1], "data": [1]}]]}
                }
            },
            "methods.encode.calibration[0][0].dtype",
            "unknown dtype 'nope'",
        ),
    ],
)
def test_refusals_name_the_field_as_written(plan: Any, field: str, words: str) -> None:
    with pytest.raises(PlanError) as caught:
        _check(plan)
    assert caught.value.field == field
    assert words in str(caught.value)
    assert "backend 'nope'" not in str(caught.value)  # a recipe is not called a backend


def test_unknown_methods_are_refused() -> None:
    with pytest.raises(UnknownMethodError, match="'nope'"):
        _check({"methods": {"nope": {}}})


@pytest.mark.parametrize(
    "plan",
    [
        None,
        {},
        {"all": {"partitioners": ["xnnpack"]}},
        {"all": {"delegate": {"backend_id": "XnnpackBackend", "compile_specs": []}}},
        {"methods": {"encode": {"partitioners": ["xnnpack"]}, "decode": {}}},
        {"all": {"partitioners": ["xnnpack"], "quantize": "xnnpack_pt2e_int8_dynamic_per_channel"}},
    ],
)
def test_good_plans_pass(plan: Any) -> None:
    _check(plan)
