"""A project's storage quota (``PTEFORGE_PROJECT_STORAGE_BYTES``), over a real server: an
upload that would take the project past it is refused (507 naming the setting) and nothing
is stored; a compile whose artifact would fails its job with that code; other projects are
not counted; deleting frees the room."""

from __future__ import annotations

import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import torch

from pteforge.server.common.blob_files import (
    StorageQuotaError,
    check_quota,
    store_project_files,
)
from pteforge.server.settings import Settings
from pteforge.storage import default_sqlite_url, open_store
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


def test_uploads_at_once_do_not_pass_the_quota_together(quota_service: ServiceProcess) -> None:
    """Each upload checks the quota before its bytes are stored, and again as its row is
    added, where the project's uploads take turns: at once, each passed the first check and
    a project stored one archive per upload running."""
    token = quota_service.create_token("quota-race", "quota-race")
    with quota_service.client(token) as client, ThreadPoolExecutor(4) as pool:
        statuses = sorted(pool.map(lambda _: _upload(client).status_code, range(4)))
        assert statuses == [201, 507, 507, 507]
        assert len(client.get("/v1/programs").json()["programs"]) == 1


def test_the_transaction_adding_the_rows_checks_the_quota_again(tmp_path: Path) -> None:
    """Two uploads whose bytes were both checked and written before either row was added
    (uploads at once): the second's row transaction refuses it (its content is left
    unreferenced, for the garbage collector)."""
    settings = Settings(home=tmp_path, project_storage_bytes=len(ARCHIVE) + 100)
    store = open_store(default_sqlite_url(tmp_path))
    try:
        with store.transaction() as tx:
            project = tx.projects.create("p").id
        archive = tmp_path / "add.pt2"
        archive.write_bytes(ARCHIVE)
        first, second = (store_project_files(store, settings, project, [archive]) for _ in "12")
        with store.transaction() as tx:
            check_quota(tx, settings, project, first[0].size)
            tx.programs.create(project, "first", first[0], [])
        with pytest.raises(StorageQuotaError), store.transaction() as tx:
            check_quota(tx, settings, project, second[0].size)
    finally:
        store.close()
