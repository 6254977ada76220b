"""A project's storage quota (``PTEFORGE_PROJECT_STORAGE_BYTES``), over a real server: an
upload that would take the project past it is refused (507 naming the setting) and nothing
is stored; a compile whose artifact would fails its job with that code; other projects are
not counted; deleting frees the room."""

from __future__ import annotations

import io
from collections.abc import Iterator

import httpx
import pytest
import torch

from tests.server.helpers import assert_error, wait_job
from tests.server.service import ServiceProcess, running_service

pytestmark = pytest.mark.server


def _archive() -> bytes:
    class AddOne(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    saved = io.BytesIO()
    torch.export.save(torch.export.export(AddOne(), (torch.zeros(2),)), saved)
    return saved.getvalue()


ARCHIVE = _archive()


@pytest.fixture(scope="module")
def quota_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A project may store one archive (stored as uploaded) and 100 bytes more: no artifact."""
    env = {"PTEFORGE_PROJECT_STORAGE_BYTES": str(len(ARCHIVE) + 100)}
    with running_service(tmp_path_factory.mktemp("home"), env) as svc:
        yield svc


def _upload(client: httpx.Client) -> httpx.Response:
    return client.post("/v1/programs", files={"program": ("add.pt2", ARCHIVE)})


def test_a_project_stores_no_more_than_its_quota(quota_service: ServiceProcess) -> None:
    a, b = (quota_service.create_token(f"quota-{p}", f"quota-{p}") for p in "ab")
    with quota_service.client(a) as client, quota_service.client(b) as other:
        program = _upload(client)
        assert program.status_code == 201, program.text
        refused = _upload(client)
        assert_error(refused, 507, "insufficient_storage")
        assert "PTEFORGE_PROJECT_STORAGE_BYTES" in refused.text
        assert len(client.get("/v1/programs").json()["programs"]) == 1  # nothing stored
        assert _upload(other).status_code == 201  # another project has its own quota

        compile_job = {"program_id": program.json()["id"], "plan": {}}
        job = wait_job(client, client.post("/v1/compile-jobs", json=compile_job).json()["id"])
        assert (job["status"], job["error"]["code"]) == ("failed", "insufficient_storage"), job
        assert client.get("/v1/artifacts").json()["artifacts"] == []

        assert client.delete(f"/v1/programs/{program.json()['id']}").status_code == 204
        assert _upload(client).status_code == 201  # the room came back
