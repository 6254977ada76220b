"""A server killed with a job in flight: after restart the job ends, it never stays running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.helpers import MIXED_PLAN, submit, upload_methods, wait_job, wait_status
from tests.server.service import ServiceProcess


@pytest.fixture(scope="module")
def own_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    svc = ServiceProcess(tmp_path_factory.mktemp("restart-home"))
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()


def test_job_in_flight_survives_a_server_kill(
    own_service: ServiceProcess, seq2seq_files: dict[str, Path]
) -> None:
    token = own_service.admin_token
    assert token
    with own_service.client(token) as client:
        program = upload_methods(client, seq2seq_files)
        job = submit(client, program["id"], MIXED_PLAN)
        wait_status(client, job["id"], "running")
    own_service.kill()  # SIGKILL: no shutdown hook runs

    own_service.start()
    with own_service.client(token) as client:
        done = wait_job(client, job["id"], timeout=240)
    assert done["status"] in {"succeeded", "failed"}, done
    if done["status"] == "failed":
        assert done["error"]["code"] and done["error"]["message"]
    else:
        assert done["artifact_id"]
