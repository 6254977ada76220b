"""``pteforge serve --no-workers`` and ``pteforge worker`` on one shared database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.nodes import (
    ApiNode,
    WorkerNode,
    children_running,
    create_token,
    ready_api,
)
from tests.cluster.programs import tiny_program_file
from tests.server.helpers import submit, upload_methods, wait_job
from tests.server.service import wait_until


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiNode]:
    with ready_api("api", tmp_path / "home", {"PTEFORGE_RUNTIME_POOL_SIZE": "1"}) as node:
        yield node


def test_api_replica_queues_and_a_worker_node_compiles(api: ApiNode, tmp_path: Path) -> None:
    assert api.proc is not None
    assert children_running(api.proc.pid, b"pteforge.server.jobs.worker") == []
    token = create_token({}, api.home)
    worker = WorkerNode("worker", api.home, {}, count=1)
    worker.start()
    try:
        with api.client(token) as client:
            program = upload_methods(client, {"forward": tiny_program_file(tmp_path, 1)})
            done = wait_job(client, submit(client, program["id"], {"all": {}})["id"], 180)
        assert done["status"] == "succeeded", done
        pids = wait_until(worker.worker_pids, 30, "the worker node's workers")
        assert worker.proc is not None
        worker.proc.terminate()  # SIGTERM: the node stops its workers, then exits
        assert worker.proc.wait(timeout=60) == 0
        wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in pids), 30, "exit")
    finally:
        worker.stop()
