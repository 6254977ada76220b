"""The program-wide plan options ``GET /v1/backends`` lists come from the plan model's fields,
so a plan key cannot be accepted without being listed, or listed without being accepted."""

from __future__ import annotations

from pteforge.backends import default_catalog
from pteforge.backends.catalog import PLAN_OPTIONS
from pteforge.contracts.plan import PlanSpec, VerifySpec


def test_every_program_wide_key_is_listed_with_its_description() -> None:
    fields = PlanSpec.program_wide()
    assert [option["name"] for option in PLAN_OPTIONS] == list(fields)
    for option in PLAN_OPTIONS:
        assert option["kind"] == "plan_option" and option["backend_id"] is None
        assert option["description"] == f'Plan key "{option["name"]}": ' + str(
            fields[option["name"]].description
        )


def test_each_option_schema_is_its_value_type() -> None:
    schemas = {option["name"]: option["options_schema"] for option in PLAN_OPTIONS}
    assert schemas["share_mutable_buffers"] == {"type": "boolean", "default": False}
    assert schemas["verify"] == VerifySpec.model_json_schema()


def test_the_catalog_lists_them_after_its_entries() -> None:
    described = default_catalog().describe_with_plan_options()
    assert described[-len(PLAN_OPTIONS) :] == list(PLAN_OPTIONS)
    assert not any(entry["kind"] == "plan_option" for entry in default_catalog().describe())
