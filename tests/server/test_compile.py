"""Upload, compile in a real worker, download and run the `.pte` natively; plans and options."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from tests.manager.stateful import (
    cached_programs,
    eager_prefill_then_decode,
    runtime_prefill_then_decode,
)
from tests.models import (
    MultiMethod,
    save_programs,
    small_mlp_programs,
    unsupported_op_programs,
)
from tests.server.helpers import (
    MIXED_PLAN,
    TERMINAL,
    assert_error,
    submit,
    upload_methods,
    wait_job,
    wait_status,
)


def test_artifact_metadata(compiled: dict[str, Any]) -> None:
    artifact, program = compiled["artifact"], compiled["program"]
    assert artifact["program_id"] == program["id"]
    assert {m["name"] for m in artifact["methods"]} == {"encode", "decode"}
    assert artifact["plan"] and artifact["report"]
    assert "encode" in json.dumps(artifact["report"])
    assert "numerics" not in artifact["report"]  # its own field


def test_artifact_numerics(compiled: dict[str, Any]) -> None:
    """The verify stage ran each method natively against the exported program."""
    numerics = compiled["artifact"]["numerics"]
    assert numerics["status"] == "passed" and numerics["flagged"] is False
    assert numerics["tolerance"] == {"rtol": 1e-4, "min_sqnr_db": 20.0}
    names = {m["name"]: [o["name"] for o in m["outputs"]] for m in compiled["artifact"]["methods"]}
    for method, record in numerics["methods"].items():
        assert record["status"] == "passed" and record["inputs"] == "example", record
        assert [o["name"] for o in record["outputs"]] == names[method]
        assert all(o["max_rel_error"] <= 1e-4 and o["sqnr_db"] > 60 for o in record["outputs"])


def test_download_runs_like_eager(
    admin: httpx.Client, compiled: dict[str, Any], seq2seq: MultiMethod, tmp_path: Path
) -> None:
    from executorch.runtime import Runtime

    artifact = compiled["artifact"]
    response = admin.get(f"/v1/artifacts/{artifact['id']}/pte")
    assert response.status_code == 200
    assert response.headers["etag"] == f'"{artifact["sha256"]}"'
    assert hashlib.sha256(response.content).hexdigest() == artifact["sha256"]
    pte = tmp_path / "model.pte"
    pte.write_bytes(response.content)
    program = Runtime.get().load_program(pte)
    for method in ("encode", "decode"):
        inputs = seq2seq.inputs[method]
        got = program.load_method(method).execute(list(inputs))[0]
        want = seq2seq.eager[method](*inputs)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_download_range_and_conditional(admin: httpx.Client, compiled: dict[str, Any]) -> None:
    artifact = compiled["artifact"]
    url = f"/v1/artifacts/{artifact['id']}/pte"
    whole = admin.get(url).content
    part = admin.get(url, headers={"Range": "bytes=10-99"})
    assert part.status_code == 206
    assert part.content == whole[10:100]
    assert part.headers["content-range"] == f"bytes 10-99/{len(whole)}"
    tail = admin.get(url, headers={"Range": "bytes=-16"})
    assert tail.status_code == 206 and tail.content == whole[-16:]
    beyond = admin.get(url, headers={"Range": f"bytes={len(whole)}-"})
    assert_error(beyond, 416, "range_not_satisfiable")
    assert beyond.headers["content-range"] == f"bytes */{len(whole)}"
    cached = admin.get(url, headers={"If-None-Match": f'"{artifact["sha256"]}"'})
    assert cached.status_code == 304 and cached.content == b""


def test_same_program_and_plan_reuses_the_artifact(
    admin: httpx.Client, compiled: dict[str, Any]
) -> None:
    again = submit(admin, compiled["program"]["id"], MIXED_PLAN)
    done = wait_job(admin, again["id"])
    assert done["status"] == "succeeded", done
    assert done["artifact_id"] == compiled["artifact"]["id"]
    assert done["stage"] is None  # never loaded or lowered: no stage was entered


def test_upload_pte_built_elsewhere(admin: httpx.Client, compiled: dict[str, Any]) -> None:
    pte = admin.get(f"/v1/artifacts/{compiled['artifact']['id']}/pte").content
    response = admin.post("/v1/artifacts", files={"pte": ("model.pte", pte)})
    assert response.status_code == 201, response.text
    uploaded = response.json()
    assert uploaded["sha256"] == compiled["artifact"]["sha256"]
    assert uploaded["program_id"] is None
    assert {m["name"] for m in uploaded["methods"]} == {"encode", "decode"}
    assert uploaded["numerics"] is None  # no exported program to compare with


def test_failed_lowering_carries_the_manager_error(admin: httpx.Client, tmp_path: Path) -> None:
    path = tmp_path / "forward.pt2"
    torch.export.save(unsupported_op_programs().programs["forward"], path)
    program = upload_methods(admin, {"forward": path})
    whole_graph = {"all": {"delegate": {"backend_id": "XnnpackBackend", "compile_specs": []}}}
    done = wait_job(admin, submit(admin, program["id"], whole_graph)["id"])
    assert done["status"] == "failed", done
    assert done["error"]["code"] == "lowering_failed"
    assert "embedding" in done["error"]["message"]


def test_cancel_running_job(admin: httpx.Client, compiled: dict[str, Any]) -> None:
    plan = {"all": {"partitioners": ["xnnpack"]}}  # a new plan: really lowers
    job = submit(admin, compiled["program"]["id"], plan)
    wait_status(admin, job["id"], "running")
    response = admin.post(f"/v1/jobs/{job['id']}/cancel")
    assert response.status_code == 200
    done = wait_job(admin, job["id"], timeout=60)
    assert done["status"] == "canceled", done
    assert done["artifact_id"] is None
    finished_again = admin.post(f"/v1/jobs/{job['id']}/cancel")
    assert finished_again.status_code == 200
    assert finished_again.json()["status"] in TERMINAL


def test_pt2_archive_with_several_programs(
    admin: httpx.Client, seq2seq: MultiMethod, tmp_path: Path
) -> None:
    """One ``program`` part written by ``package_pt2`` holds both methods; sent as a method's
    part, the refusal says which part takes it."""
    from executorch.runtime import Runtime
    from torch.export.pt2_archive._package import package_pt2

    archive = tmp_path / "model.pt2"
    package_pt2(archive, exported_programs=dict(seq2seq.programs))
    refused = admin.post("/v1/programs", files={"forward": ("model.pt2", archive.read_bytes())})
    assert_error(refused, 422)
    assert "(decode, encode)" in refused.text and "the part 'program'" in refused.text
    response = admin.post("/v1/programs", files={"program": ("model.pt2", archive.read_bytes())})
    assert response.status_code == 201, response.text
    program = response.json()
    assert {m["name"] for m in program["methods"]} == {"encode", "decode"}
    done = wait_job(admin, submit(admin, program["id"], {"all": {}})["id"])
    assert done["status"] == "succeeded", done
    pte = admin.get(f"/v1/artifacts/{done['artifact_id']}/pte").content
    method = Runtime.get().load_program(pte).load_method("decode")
    inputs = seq2seq.inputs["decode"]
    got = method.execute(list(inputs))[0]
    torch.testing.assert_close(got, seq2seq.eager["decode"](*inputs), atol=1e-4, rtol=1e-4)


def test_an_artifact_over_its_plan_tolerance_is_flagged(
    admin: httpx.Client, tmp_path: Path
) -> None:
    """An int8 artifact judged on SQNR against a threshold no int8 model meets."""
    path = tmp_path / "forward.pt2"
    torch.export.save(small_mlp_programs().programs["forward"], path)
    program = upload_methods(admin, {"forward": path})
    plan = {
        "all": {"partitioners": ["xnnpack"], "quantize": "xnnpack_pt2e_int8_dynamic_per_channel"},
        "verify": {"min_sqnr_db": 100},
    }
    done = wait_job(admin, submit(admin, program["id"], plan)["id"])
    assert done["status"] == "succeeded", done
    artifact = admin.get(f"/v1/artifacts/{done['artifact_id']}").raise_for_status().json()
    numerics = artifact["numerics"]
    assert numerics["status"] == "over_tolerance" and numerics["flagged"] is True
    assert numerics["methods"]["forward"]["check"] == {"metric": "sqnr_db", "limit": 100.0}
    assert 20.0 < numerics["methods"]["forward"]["outputs"][0]["sqnr_db"] < 100.0


@pytest.mark.parametrize(
    ("plan", "field"),
    [
        ({"share_mutable_buffers": "yes"}, "share_mutable_buffers"),
        ({"verify": {"rtol": -1}}, "verify.rtol"),
        ({"verify": {"atol": 1}}, "verify.atol"),
        ({"all": {}, "optimize": True}, "optimize"),
    ],
)
def test_bad_program_wide_plan_options_are_422(
    admin: httpx.Client, compiled: dict[str, Any], plan: dict[str, Any], field: str
) -> None:
    body = {"program_id": compiled["program"]["id"], "plan": plan}
    response = admin.post("/v1/compile-jobs", json=body)
    assert_error(response, 422)
    assert field in response.json()["error"]["message"]


def test_shared_mutable_buffers_through_the_service(admin: httpx.Client, tmp_path: Path) -> None:
    """prefill writes the cache decode reads, in one loaded program of the downloaded .pte."""
    model = cached_programs()
    program = upload_methods(admin, save_programs(model.programs, tmp_path))
    plan = {"all": {"partitioners": ["xnnpack"]}, "share_mutable_buffers": True}
    done = wait_job(admin, submit(admin, program["id"], plan)["id"])
    assert done["status"] == "succeeded", done
    artifact = admin.get(f"/v1/artifacts/{done['artifact_id']}").raise_for_status().json()
    assert artifact["plan"]["share_mutable_buffers"] is True
    assert artifact["numerics"]["status"] == "passed", artifact["numerics"]
    pte = admin.get(f"/v1/artifacts/{artifact['id']}/pte").content
    got = runtime_prefill_then_decode(pte, model)
    torch.testing.assert_close(got, eager_prefill_then_decode(model), atol=1e-5, rtol=1e-5)


def test_backends_list_the_program_wide_plan_options(admin: httpx.Client) -> None:
    entries = {e["name"]: e for e in admin.get("/v1/backends").raise_for_status().json()}
    share = entries["share_mutable_buffers"]
    assert share["kind"] == "plan_option" and share["options_schema"]["type"] == "boolean"
    verify = entries["verify"]["options_schema"]["properties"]
    assert verify["rtol"]["default"] == 1e-4 and verify["min_sqnr_db"]["default"] == 20.0
