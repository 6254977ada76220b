"""The service on PostgreSQL (the production database) instead of the embedded SQLite."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as triton_grpc
from tritonclient.utils import InferenceServerException

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


def test_an_id_with_a_nul_character_names_nothing(pg_service: ServiceProcess) -> None:
    """PostgreSQL text cannot hold a NUL: psycopg refused the lookup and every route that
    takes an id answered 500; it names no row, as on SQLite (404)."""
    assert pg_service.admin_token
    with pg_service.client(pg_service.admin_token) as client:
        for path in ("/v1/artifacts/a%00b", "/v1/jobs/a%00b/events", "/v1/models/a%00b"):
            assert_error(client.get(path), 404, "not_found")
        compile_job = {"program_id": "a\x00", "plan": {"all": {}}}
        assert_error(client.post("/v1/compile-jobs", json=compile_job), 404, "not_found")
        config = client.get("/v2/models/a%00b.forward/config")
        assert config.status_code == 404 and set(config.json()) == {"error"}, config.text
    triton = triton_grpc.InferenceServerClient(f"127.0.0.1:{pg_service.grpc_port}")
    token = {"authorization": f"Bearer {pg_service.admin_token}"}
    with pytest.raises(InferenceServerException) as refused:
        triton.get_model_config("a\x00b.forward", headers=token)
    assert refused.value.status() == "StatusCode.NOT_FOUND", refused.value
