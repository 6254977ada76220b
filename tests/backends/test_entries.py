"""The suite every catalog entry passes: schema, description, options, lowering, execution."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import torch

from pteforge.backends import (
    BaseEntry,
    InvalidOptionsError,
    QuantizerEntryBase,
    default_catalog,
    executable_backend_ids,
)
from tests.backends.harness import (
    LOWERING_OPTIONS,
    assert_int8_close,
    delegated_backends,
    lower_with,
    run_pte,
    tiny_mlp,
)

CATALOG = default_catalog()
NAMES = list(CATALOG.names())

# A wrongly typed value per entry that has options, and the field the error must name.
BAD_VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "xnnpack": ({"precision": "fp16"}, "precision"),
    "coreml": ({"compute_unit": "GPU_ONLY"}, "compute_unit"),
    "openvino": ({"device": "cpu; rm"}, "device"),
    "vulkan": ({"force_fp16": "sometimes"}, "force_fp16"),
    "ethos-u": ({"target": "ethos-u55"}, "target"),
    "delegate": (
        {"backend_id": "XnnpackBackend", "compile_specs": [{"key": "k", "value_b64": "*"}]},
        "compile_specs.0.value_b64",
    ),
}


def entry(name: str) -> BaseEntry[Any]:
    found = CATALOG.get(name)
    assert isinstance(found, BaseEntry)
    return found


def test_catalog_lists_the_issue_targets() -> None:
    assert {
        "portable",
        "xnnpack",
        "openvino",
        "coreml",
        "vulkan",
        "ethos-u",
        "delegate",
        "xnnpack_pt2e_int8_dynamic_per_channel",
        "xnnpack_pt2e_int8_static_per_channel",
    } <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_options_schema_is_valid_json_schema(name: str) -> None:
    schema = entry(name).options_model.model_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    # The schema and the pydantic model agree on what is valid.
    jsonschema.validate(LOWERING_OPTIONS.get(name, {}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"no_such_option": 1}, schema)


@pytest.mark.parametrize("name", NAMES)
def test_describe_is_json_with_the_pinned_keys(name: str) -> None:
    described = json.loads(json.dumps(entry(name).describe()))
    assert described["name"] == name
    assert described["kind"] == entry(name).kind.value
    assert described["backend_id"] == entry(name).backend_id
    assert described["options_schema"]["type"] == "object"
    assert isinstance(described["can_execute"], bool)
    assert described["description"]


@pytest.mark.parametrize("name", NAMES)
def test_unknown_option_is_rejected_by_name(name: str) -> None:
    options = {**LOWERING_OPTIONS.get(name, {}), "no_such_option": 1}
    with pytest.raises(InvalidOptionsError, match=rf"{name}.*no_such_option"):
        entry(name).validate(options)


@pytest.mark.parametrize("name", sorted(BAD_VALUES))
def test_wrongly_typed_option_is_rejected_by_name(name: str) -> None:
    options, field = BAD_VALUES[name]
    with pytest.raises(InvalidOptionsError, match=field.replace(".", r"\.")):
        entry(name).validate(options)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(options, entry(name).options_model.model_json_schema())


def test_can_execute_follows_the_runtime_registry() -> None:
    executable = executable_backend_ids()
    for item in CATALOG:
        if item.backend_id is not None:
            assert item.can_execute() == (item.backend_id in executable), item.name
    assert entry("portable").can_execute()


@pytest.mark.parametrize("name", NAMES)
def test_entry_lowers_and_runs_like_eager(name: str) -> None:
    model = tiny_mlp()
    pte = lower_with(entry(name), model)
    target = entry(name).backend_id or LOWERING_OPTIONS.get(name, {}).get("backend_id")
    assert delegated_backends(pte) == ([] if target is None else [target])
    (inputs,) = model.inputs.values()
    if not entry(name).can_execute():
        # Compile-only here: the runtime must indeed refuse the delegate.
        with pytest.raises(RuntimeError, match="Failed to load method"):
            run_pte(pte, "forward", inputs)
        return
    (actual,) = run_pte(pte, "forward", inputs)
    expected = model.eager["forward"](*inputs).detach()
    if isinstance(entry(name), QuantizerEntryBase):
        assert_int8_close(actual, expected)
    else:
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
