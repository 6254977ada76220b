"""Profile jobs (issue 19): the shared server's seq2seq artifact (``encode`` lowered to
XNNPACK, ``decode`` portable) profiled through the job queue, and the requests it refuses."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from pteforge.cli import main
from pteforge.client import Client
from pteforge.contracts.specs import OIP_DATATYPES
from pteforge.runtime.profile_run import operator_runs
from tests.models import MultiMethod
from tests.server.helpers import assert_error, wait_job
from tests.server.service import ServiceProcess

ITERATIONS = 3


def profile_job(client: httpx.Client, body: dict[str, Any]) -> Any:
    response = client.post("/v1/profile-jobs", json=body)
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["kind"] == "profile" and job["artifact_id"] == body["artifact_id"]
    return job


def profiled(client: httpx.Client, body: dict[str, Any]) -> Any:
    """The profile of a profile job of ``body``, once it succeeded."""
    done = wait_job(client, profile_job(client, body)["id"])
    assert done["status"] == "succeeded", done
    response = client.get(f"/v1/jobs/{done['id']}/profile")
    assert response.status_code == 200, response.text
    return response.json()


def oip_inputs(artifact: dict[str, Any], method: str, seq2seq: MultiMethod) -> list[Any]:
    """``method``'s eager inputs as /v2 JSON tensors under the artifact's input names."""
    (spec,) = [m for m in artifact["methods"] if m["name"] == method]
    return [
        {"name": t["name"], "datatype": OIP_DATATYPES[t["dtype"]], "shape": list(value.shape),
         "data": value.reshape(-1).tolist()}
        for t, value in zip(spec["inputs"], seq2seq.inputs[method], strict=True)
    ]  # fmt: skip


def check_profile(profile: dict[str, Any], artifact_id: str, method: str) -> None:
    assert profile["artifact_id"] == artifact_id and profile["method"] == method
    latency = profile["latency_us"]
    assert profile["iterations"] == len(latency["samples"]) == ITERATIONS
    assert 0 < latency["min"] <= latency["p50"] <= latency["p90"] <= latency["max"]
    assert profile["load_ms"]["cold"] > 0 and profile["load_ms"]["warm"] > 0
    assert profile["peak_memory_bytes"] >= 0
    rows = profile["operators"]
    totals = [row["total_us"] for row in rows]
    assert totals == sorted(totals, reverse=True)
    assert sum(row["share"] for row in rows) == pytest.approx(1.0)
    runs = profile["operator_runs"]  # the traced runs whose events fit the read budget
    assert 1 <= runs <= operator_runs(ITERATIONS)
    assert all(row["calls"] % runs == 0 < row["calls"] for row in rows)


def test_profile_of_an_xnnpack_method(admin: httpx.Client, compiled: dict[str, Any]) -> None:
    artifact_id = compiled["artifact"]["id"]
    body = {"artifact_id": artifact_id, "method": "encode", "iterations": ITERATIONS}
    profile = profiled(admin, body)
    check_profile(profile, artifact_id, "encode")
    backends = {row["backend"] for row in profile["operators"]}
    assert backends == {"XnnpackBackend", "portable"}, profile["operators"]
    (delegate,) = [r for r in profile["operators"] if r["backend"] == "XnnpackBackend"]
    assert delegate["name"] == "DELEGATE_CALL"


def test_profile_of_an_uploaded_pte_on_given_inputs(
    admin: httpx.Client, compiled: dict[str, Any], seq2seq: MultiMethod
) -> None:
    pte = admin.get(f"/v1/artifacts/{compiled['artifact']['id']}/pte").content
    uploaded = admin.post("/v1/artifacts", files={"pte": ("model.pte", pte)}).json()
    body = {"artifact_id": uploaded["id"], "method": "decode", "iterations": ITERATIONS}
    refused = admin.post("/v1/profile-jobs", json=body)
    assert_error(refused, 409, "conflict")
    assert "no numerics check" in refused.json()["error"]["message"]
    inputs = oip_inputs(uploaded, "decode", seq2seq)
    profile = profiled(admin, {**body, "inputs": inputs})
    check_profile(profile, uploaded["id"], "decode")
    assert {row["backend"] for row in profile["operators"]} == {"portable"}


def test_bad_profile_requests_name_what_is_wrong(
    admin: httpx.Client, compiled: dict[str, Any], seq2seq: MultiMethod
) -> None:
    artifact = compiled["artifact"]
    good = {"artifact_id": artifact["id"], "method": "decode"}
    missing = admin.post("/v1/profile-jobs", json={**good, "artifact_id": "art_nope"})
    assert_error(missing, 404, "not_found")
    assert "art_nope" in missing.json()["error"]["message"]
    unknown = admin.post("/v1/profile-jobs", json={**good, "method": "generate"})
    assert_error(unknown, 404, "not_found")
    assert "'generate'" in unknown.json()["error"]["message"]
    for iterations in (0, 1001):
        answer = admin.post("/v1/profile-jobs", json={**good, "iterations": iterations})
        assert_error(answer, 422)
        assert "iterations" in answer.json()["error"]["message"]
    inputs = oip_inputs(artifact, "decode", seq2seq)
    first = inputs[0]["name"]
    wrong_shape = [{**inputs[0], "shape": [1, *inputs[0]["shape"]]}, *inputs[1:]]
    answer = admin.post("/v1/profile-jobs", json={**good, "inputs": wrong_shape})
    assert_error(answer, 422)
    assert repr(first) in answer.json()["error"]["message"]
    renamed = [{**inputs[0], "name": "bogus"}, *inputs[1:]]
    answer = admin.post("/v1/profile-jobs", json={**good, "inputs": renamed})
    assert_error(answer, 422)
    assert "'bogus'" in answer.json()["error"]["message"]


def test_profile_is_there_only_once_the_job_succeeded(
    admin: httpx.Client, compiled: dict[str, Any]
) -> None:
    compile_job = compiled["job"]["id"]
    assert_error(admin.get(f"/v1/jobs/{compile_job}/profile"), 404, "not_found")
    body = {"artifact_id": compiled["artifact"]["id"], "method": "decode", "iterations": 1000}
    job = profile_job(admin, body)
    if admin.post(f"/v1/jobs/{job['id']}/cancel").status_code == 409:
        pytest.skip("the profile finished before its cancel")
    done = wait_job(admin, job["id"])
    assert done["status"] == "canceled", done
    answer = admin.get(f"/v1/jobs/{job['id']}/profile")
    assert_error(answer, 409, "conflict")
    assert "canceled" in answer.json()["error"]["message"]


@pytest.mark.usefixtures("cli_as_admin")
def test_client_and_cli_profile(
    service: ServiceProcess,
    compiled: dict[str, Any],
    seq2seq: MultiMethod,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert service.admin_token
    artifact = compiled["artifact"]["id"]
    with Client(service.url, service.admin_token) as client:  # torch tensors, in order
        report = client.profile(artifact, "decode", 2, list(seq2seq.inputs["decode"]))
    assert report.artifact_id == artifact and len(report.latency_us.samples) == 2
    assert {row.backend for row in report.operators} == {"portable"}
    assert main(["profile", artifact, "encode", "-n", "2", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["iterations"] == 2 and printed["method"] == "encode"
    assert any(row["backend"] == "XnnpackBackend" for row in printed["operators"])
