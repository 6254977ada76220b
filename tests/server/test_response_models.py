"""The typed response models write exactly the JSON the routes wrote when they were open dicts:
the stored plan, report and numerics come back key for key, in order, and the prebuilt
catalog body validates as the model the OpenAPI document declares."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter, ValidationError

from pteforge.contracts.specs import MethodSignature, TensorSpec
from pteforge.server.artifacts.schemas import NUMERICS_KEY, ArtifactOut
from pteforge.server.backends_api.schemas import CatalogEntryOut
from pteforge.server.inference.routes_models import ServerMetadata
from pteforge.server.programs.schemas import ProgramOut
from pteforge.storage.domain import Artifact, Program

NOW = datetime(2026, 1, 1, tzinfo=UTC)
METHODS = (
    MethodSignature("forward", (TensorSpec("x", "float32", (2, 4)),), ()),
    MethodSignature(
        "decode",
        (TensorSpec("ids", "int64", (-1, -1), max_shape=(1, 16)),),
        (TensorSpec("logits", "float32", (1, 8)),),
    ),
)
FORWARD_REPORT = {
    "delegated_operators": 2,
    "non_delegated_operators": 1,
    "delegated_subgraphs": 1,
    "backends": {"XnnpackBackend": {"delegated_operators": 2, "delegated_subgraphs": 1}},
    "operators": {
        "aten_linear_default": {"delegated": 1, "non_delegated": 0},
        "getitem": {"delegated": 0, "non_delegated": 1},
    },
}
REPORT = {
    "methods": {"forward": FORWARD_REPORT},
    "program": {"constant_bytes": 128, "unique_constant_bytes": 68, "shared_constant_bytes": 60},
}
CHECK = {"metric": "max_rel_error", "limit": 0.001}
OUTPUT = {
    "name": "relu",
    "max_abs_error": 0.0,
    "max_rel_error": 0.0,
    "sqnr_db": None,
    "exact": True,
    "within_tolerance": True,
}
NUMERICS = {
    "status": "error",
    "flagged": True,
    "tolerance": {"rtol": 0.001, "min_sqnr_db": 20.0},
    "seconds": 0.0155,
    "methods": {
        "forward": {"check": CHECK, "inputs": "example", "outputs": [OUTPUT], "status": "passed"},
        "decode": {"check": CHECK, "inputs": "generated", "status": "error", "message": "boom"},
        "encode": {
            "check": {"metric": "sqnr_db", "limit": 20.0},
            "status": "not_executable",
            "message": "delegated to CoreMLBackend",
        },
    },
}
PLANS: list[dict[str, Any]] = [
    {},
    {"methods": {"other": {}}, "all": {"partitioners": ["xnnpack"]}, "verify": {"rtol": 0.001}},
    {
        "all": {
            "partitioners": [{"name": "xnnpack", "options": {}}],
            "quantize": "xnnpack_pt2e_int8_dynamic_per_channel",
        },
        "share_mutable_buffers": True,
    },
    {"all": {"delegate": {"backend_id": "XnnpackBackend", "compile_specs": []}}},
]


def _artifact(plan: dict[str, Any], report: dict[str, Any]) -> Artifact:
    return Artifact("a", "p", "prog", "s", 1, plan, "h", report, METHODS, NOW)


def _open_dict_json(artifact: Artifact) -> dict[str, Any]:
    """What ``ArtifactOut`` wrote when plan, methods, report and numerics were open dicts."""
    report = {k: v for k, v in artifact.report.items() if k != NUMERICS_KEY}
    return {
        "id": artifact.id,
        "sha256": artifact.sha256,
        "size_bytes": artifact.size_bytes,
        "program_id": artifact.program_id,
        "plan": artifact.plan,
        "methods": [m.to_json() for m in artifact.methods],
        "report": report,
        "numerics": artifact.report.get(NUMERICS_KEY),
        "generation": None,  # only a language model's artifact has one (GENERATION_KEY)
        "data": None,  # only a .pte uploaded with its .ptd has one
        "created_at": "2026-01-01T00:00:00Z",
    }


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize(
    "report",
    [{**REPORT, NUMERICS_KEY: NUMERICS}, REPORT, {"source": "upload"}, {}],
    ids=["compiled", "before-numerics", "uploaded", "empty"],
)
def test_artifact_json_is_the_stored_json(plan: dict[str, Any], report: dict[str, Any]) -> None:
    artifact = _artifact(plan, report)
    written = json.loads(ArtifactOut.of(artifact).model_dump_json())
    written.pop("toolchain")
    expected = _open_dict_json(artifact)
    assert json.dumps(written) == json.dumps(expected)  # same keys, values and order


def test_a_report_key_this_version_does_not_know_is_kept_as_written() -> None:
    report = {**REPORT, "surprise": {"from": "another version"}}
    written = json.loads(ArtifactOut.of(_artifact({}, report)).model_dump_json())
    assert written["report"]["surprise"] == {"from": "another version"}


def test_a_declared_field_with_a_wrong_value_is_refused() -> None:
    numerics = {**NUMERICS, "methods": {"forward": {"check": CHECK, "status": "late"}}}
    with pytest.raises(ValidationError, match="status"):
        ArtifactOut.of(_artifact({}, {NUMERICS_KEY: numerics}))


def test_program_methods_keep_their_json_form() -> None:
    program = Program("prog", "p", "n", "s", 1, METHODS, NOW)
    written = json.loads(ProgramOut.of(program).model_dump_json())
    assert written["methods"] == [m.to_json() for m in METHODS]
    assert "max_shape" not in written["methods"][0]["inputs"][0]
    assert written["methods"][1]["inputs"][0]["max_shape"] == [1, 16]


def test_the_catalog_body_is_a_list_of_catalog_entries(admin: httpx.Client) -> None:
    body = admin.get("/v1/backends").raise_for_status().content
    adapter = TypeAdapter(list[CatalogEntryOut])
    entries = adapter.validate_json(body)
    assert json.loads(adapter.dump_json(entries, exclude_unset=True)) == json.loads(body)
    assert {e.kind for e in entries} >= {"partitioner", "delegate", "quantizer", "plan_option"}


def test_server_metadata_keeps_its_keys(admin: httpx.Client) -> None:
    body = admin.get("/v2").raise_for_status().json()
    assert list(body) == ["name", "version", "extensions"]
    assert ServerMetadata.model_validate(body).model_dump() == body
