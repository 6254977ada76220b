"""The plan model (``pteforge.contracts.plan``): strict at every level, the JSON of API.md
section 2 accepted as written, errors worded with the field as the user wrote it, and the
canonical form whose hash compiled artifacts are reused under."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from pteforge.contracts.plan import PlanSpec, canonical_plan
from pteforge.contracts.plan_problems import PlanProblem, plan_problem
from pteforge.manager import PlanError

API_EXAMPLE: dict[str, Any] = {
    "methods": {
        "encode": {"partitioners": ["xnnpack", {"name": "coreml", "options": {"a": [1, None]}}]},
        "decode": {
            "delegate": {
                "backend_id": "XnnpackBackend",
                "compile_specs": [{"key": "k", "value_b64": "dg=="}],
            }
        },
        "score": {},
    },
    "all": {
        "quantize": "xnnpack_pt2e_int8_static_per_channel",
        "calibration": [[{"dtype": "float32", "shape": [1, 2], "data": [1.0, 2.0]}]],
    },
    "share_mutable_buffers": True,
    "verify": {"rtol": 0.001, "min_sqnr_db": 30.0},
}


def problem_of(plan: Any) -> PlanProblem:
    with pytest.raises(ValidationError) as raised:
        PlanSpec.model_validate(plan)
    problem = plan_problem(raised.value.errors())
    assert problem is not None
    return problem


def test_the_api_forms_are_accepted_and_dump_as_written() -> None:
    spec = PlanSpec.model_validate(API_EXAMPLE)
    assert spec.model_dump(mode="json", exclude_unset=True) == API_EXAMPLE


def test_integers_are_numbers_but_booleans_and_strings_are_not() -> None:
    assert (
        PlanSpec.model_validate({"verify": {"min_sqnr_db": 30}}).verify
        == PlanSpec(
            verify={"min_sqnr_db": 30.0}  # type: ignore[arg-type]
        ).verify
    )
    assert problem_of({"verify": {"rtol": True}}) == ("verify.rtol", "must be a number")
    assert problem_of({"share_mutable_buffers": 1}).field == "share_mutable_buffers"


@pytest.mark.parametrize(
    ("plan", "field", "owner"),
    [
        ({"al": {}}, "al", "a plan has all, constant_methods, methods, share_mutable_buffers"),
        ({"all": {"partitioner": []}}, "all.partitioner", "a target has calibration, delegate"),
        ({"methods": {"m": {"x": 1}}}, "methods.m.x", "a target has"),
        ({"all": {"partitioners": [{"name": "x", "o": 1}]}}, "all.partitioners[0].o", "name"),
        ({"all": {"delegate": {"backend_id": "X", "y": 1}}}, "all.delegate.y", "backend_id"),
        (
            {"all": {"delegate": {"backend_id": "X", "compile_specs": [{"key": "k", "v": ""}]}}},
            "all.delegate.compile_specs[0].v",
            "a compile spec has key, value_b64",
        ),
        (
            {"all": {"calibration": [[{"shape": [], "data": 1, "dtyp": "int8"}]]}},
            "all.calibration[0][0].dtyp",
            "a tensor has data, dtype, shape",
        ),
        ({"verify": {"atol": 1}}, "verify.atol", "verify has min_sqnr_db, rtol"),
    ],
)
def test_unknown_keys_are_refused_at_every_level(plan: Any, field: str, owner: str) -> None:
    problem = problem_of(plan)
    assert problem.field == field
    assert problem.message.startswith("unknown field; ") and owner in problem.message


def test_the_schema_forbids_unknown_keys_everywhere() -> None:
    schema = PlanSpec.model_json_schema()
    objects = [schema, *schema["$defs"].values()]
    plan_parts = [s for s in objects if s.get("type") == "object" and "properties" in s]
    assert len(plan_parts) == 7
    assert all(part["additionalProperties"] is False for part in plan_parts)
    assert all(p.get("description") for part in plan_parts for p in part["properties"].values())


def test_a_partitioner_is_a_name_or_an_object() -> None:
    assert problem_of({"all": {"partitioners": [3]}}) == (
        "all.partitioners[0]",
        "must be a name or {'name': str, 'options': {...}}",
    )
    assert problem_of({"all": {"partitioners": [{"name": 3}]}}).field == "all.partitioners[0].name"


def test_a_problem_under_a_root_and_as_the_library_words_it() -> None:
    with pytest.raises(ValidationError) as raised:
        PlanSpec.model_validate({"all": {"quantize": ""}})
    errors = [{**e, "loc": ("body", "plan", *e["loc"])} for e in raised.value.errors()]
    problem = plan_problem(errors, root=("body", "plan"))  # type: ignore[arg-type]
    assert problem == ("all.quantize", "must not be empty")
    assert str(problem) == str(PlanError(problem.field, problem.message))
    assert plan_problem(errors, root=("body", "program_id")) is None  # type: ignore[arg-type]


def test_the_canonical_form_and_hash_of_known_plans_never_change() -> None:
    """Stored artifacts are found again by this hash: changing the canonical form (or what
    a plan key dumps as) stops every existing artifact from being reused."""
    canonical, digest = canonical_plan(PlanSpec.model_validate(API_EXAMPLE))
    assert canonical == API_EXAMPLE
    assert digest == "4806be5bdb97a2ffb081ad15fbcea94ce4ea2d658b1d37375e4feadc8b280f4d"
    one = {"all": {"partitioners": ["xnnpack"]}}
    assert canonical_plan(PlanSpec.model_validate(one)) == (
        one,
        "15adc5fdc0466d3e0722b64b9aaddfc83a3bfc7d4e9dac93be194dba89a747f0",
    )


def test_keys_that_say_nothing_leave_the_canonical_form() -> None:
    empty: tuple[dict[str, Any], str] = (
        {},
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
    )
    silent = {"methods": {}, "all": {}, "verify": {}, "share_mutable_buffers": False}
    assert canonical_plan(PlanSpec()) == empty
    assert canonical_plan(PlanSpec.model_validate(silent)) == empty
    assert canonical_plan(PlanSpec.model_validate({"methods": None, "verify": None})) == empty
    said = {"share_mutable_buffers": True, "verify": {"min_sqnr_db": 30}}
    assert canonical_plan(PlanSpec.model_validate(said))[0] == {
        "share_mutable_buffers": True,
        "verify": {"min_sqnr_db": 30.0},  # as written, a number as a float
    }


def test_each_method_gets_its_own_target_else_all_else_portable() -> None:
    spec = PlanSpec.model_validate(API_EXAMPLE)
    assert spec.target_of("encode") == spec.methods["encode"]  # type: ignore[index]
    assert spec.target_of("other") == spec.all
    assert spec.target_of("score").model_dump(exclude_unset=True) == {}  # its own {} wins
    assert not PlanSpec().target_of("forward").delegated
    assert list(PlanSpec.program_wide()) == ["share_mutable_buffers", "constant_methods", "verify"]
