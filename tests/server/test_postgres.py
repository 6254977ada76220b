"""The service on PostgreSQL (the production database) instead of the embedded SQLite."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres import fresh_database
from tests.server.helpers import assert_error, submit, upload_methods, wait_job
from tests.server.service import ServiceProcess, running_service

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A fresh database on the server ``tests/run-with-postgres.sh`` started."""
    with fresh_database("srv") as url:
        yield url


@pytest.fixture(scope="module")
def pg_service(
    postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    env = {"PTEFORGE_DATABASE_URL": postgres_url}
    with running_service(tmp_path_factory.mktemp("pg-home"), env, timeout=120) as svc:
        yield svc


def test_compile_and_isolation_on_postgres(
    pg_service: ServiceProcess, seq2seq_files: dict[str, Path]
) -> None:
    assert pg_service.admin_token
    with pg_service.client(pg_service.admin_token) as client:
        program = upload_methods(client, seq2seq_files)
        done = wait_job(client, submit(client, program["id"], {"all": {}})["id"])
        assert done["status"] == "succeeded", done
        artifact = client.get(f"/v1/artifacts/{done['artifact_id']}").json()
        pte = client.get(f"/v1/artifacts/{artifact['id']}/pte").content
        assert hashlib.sha256(pte).hexdigest() == artifact["sha256"]
    other = pg_service.create_token("other", "other-project")
    with pg_service.client(other) as intruder:
        assert_error(intruder.get(f"/v1/artifacts/{artifact['id']}"), 404, "not_found")
