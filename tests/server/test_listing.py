"""Listing and deleting a project's programs, artifacts and jobs over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from tests.models import small_mlp_programs
from tests.server.helpers import assert_error, submit, upload_methods, wait_job
from tests.server.service import ServiceProcess


@pytest.fixture(scope="module")
def mlp_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("listing") / "forward.pt2"
    torch.export.save(small_mlp_programs().programs["forward"], path)
    return path


@pytest.fixture(scope="module")
def stranger(service: ServiceProcess) -> Any:
    with service.client(service.create_token("stranger", "listing-other")) as client:
        yield client


def _ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for item in items]


def test_programs_are_listed_newest_first_and_only_to_their_project(
    admin: httpx.Client, stranger: httpx.Client, mlp_file: Path
) -> None:
    first = upload_methods(admin, {"forward": mlp_file}, name="first")
    second = upload_methods(admin, {"forward": mlp_file}, name="second")
    listed = admin.get("/v1/programs").raise_for_status().json()["programs"]
    assert _ids(listed)[:2] == [second["id"], first["id"]]
    assert listed[0] == second  # the same object GET /v1/programs/{id} answers
    assert _ids(admin.get("/v1/programs", params={"limit": 1}).json()["programs"]) == [second["id"]]
    assert first["id"] not in _ids(stranger.get("/v1/programs").json()["programs"])
    assert_error(admin.get("/v1/programs", params={"limit": 0}), 422)


def test_deleting_a_program(admin: httpx.Client, stranger: httpx.Client, mlp_file: Path) -> None:
    program = upload_methods(admin, {"forward": mlp_file}, name="doomed")
    url = f"/v1/programs/{program['id']}"
    assert_error(stranger.delete(url), 404, "not_found")  # another project cannot see it
    assert admin.get(url).status_code == 200
    assert admin.delete(url).status_code == 204
    assert_error(admin.get(url), 404, "not_found")
    assert_error(admin.delete(url), 404, "not_found")


def test_jobs_and_artifacts_are_listed_and_an_artifact_can_be_deleted(
    admin: httpx.Client, stranger: httpx.Client, mlp_file: Path
) -> None:
    program = upload_methods(admin, {"forward": mlp_file}, name="listed")
    job = wait_job(admin, submit(admin, program["id"], {"all": {}})["id"])
    assert job["status"] == "succeeded", job
    succeeded = admin.get("/v1/jobs", params={"status": "succeeded"}).json()["jobs"]
    assert job["id"] in _ids(succeeded)
    assert all(j["status"] == "succeeded" for j in succeeded)
    assert job["id"] not in _ids(admin.get("/v1/jobs", params={"status": "queued"}).json()["jobs"])
    assert job["id"] not in _ids(stranger.get("/v1/jobs").json()["jobs"])
    for hidden in (
        stranger.get(f"/v1/jobs/{job['id']}"),
        stranger.get(f"/v1/jobs/{job['id']}/events"),
        stranger.post(f"/v1/jobs/{job['id']}/cancel"),
    ):  # another project's job is as absent as a missing one
        assert_error(hidden, 404, "not_found")
        assert repr(job["id"]) in hidden.json()["error"]["message"]
    assert_error(admin.get("/v1/jobs", params={"status": "sleeping"}), 422)

    artifact_id = job["artifact_id"]
    assert artifact_id in _ids(admin.get("/v1/artifacts").json()["artifacts"])
    assert artifact_id not in _ids(stranger.get("/v1/artifacts").json()["artifacts"])
    assert_error(stranger.delete(f"/v1/artifacts/{artifact_id}"), 404, "not_found")
    assert admin.delete(f"/v1/artifacts/{artifact_id}").status_code == 204
    assert_error(admin.get(f"/v1/artifacts/{artifact_id}"), 404, "not_found")
    assert_error(admin.get(f"/v1/artifacts/{artifact_id}/pte"), 404, "not_found")
    assert artifact_id not in _ids(admin.get("/v1/artifacts").json()["artifacts"])
