"""Processes dying under the service: a killed server or worker never strands a job.

Runs last (module order) on the package's shared server, which it leaves restarted.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from tests.cluster.programs import tiny_program_file
from tests.server.helpers import submit, upload_methods, wait_job, wait_status
from tests.server.service import ServiceProcess, wait_until

# A plan no other test compiles (its own tolerance), so the job really lowers instead of
# reusing an artifact; portable, as XNNPACK's partitioning would only make it longer.
RESTART_PLAN = {"methods": {"decode": {}}, "verify": {"rtol": 1.5e-4}}


def test_job_in_flight_survives_a_server_kill(
    service: ServiceProcess, seq2seq_program: dict[str, Any]
) -> None:
    token = service.admin_token
    assert token
    with service.client(token) as client:
        job = submit(client, seq2seq_program["id"], RESTART_PLAN)
        wait_status(client, job["id"], "running")
    service.kill()  # SIGKILL: no shutdown hook runs; the workers see their parent die

    service.start(timeout=300.0)  # as running_service: a loaded 2-core machine took over 120 s
    with service.client(token) as client:
        done = wait_job(client, job["id"], timeout=240)
    assert done["status"] in {"succeeded", "failed"}, done
    if done["status"] == "failed":
        assert done["error"]["code"] and done["error"]["message"]
    else:
        assert done["artifact_id"]


def test_a_killed_worker_is_replaced(service: ServiceProcess, tmp_path: Path) -> None:
    before = wait_until(service.worker_pids, 30, "a compile worker")
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    wait_until(
        lambda: [p for p in service.worker_pids() if p not in before], 60, "a new compile worker"
    )
    # A program of its own (a seed no other test uploads): the new worker really lowers it.
    with service.client(service.admin_token) as client:
        program = upload_methods(client, {"forward": tiny_program_file(tmp_path, 22)})
        done = wait_job(client, submit(client, program["id"], {"all": {}})["id"])
    assert done["status"] == "succeeded", done
