"""A server killed with a job in flight: after restart the job ends, it never stays running.

Runs last (module order) on the package's shared server, which it leaves restarted.
"""

from __future__ import annotations

from typing import Any

from tests.server.helpers import submit, wait_job, wait_status
from tests.server.service import ServiceProcess

# A plan no other test compiles, so the job really lowers instead of reusing an artifact.
RESTART_PLAN = {"methods": {"decode": {"partitioners": ["xnnpack"]}}}


def test_job_in_flight_survives_a_server_kill(
    service: ServiceProcess, seq2seq_program: dict[str, Any]
) -> None:
    token = service.admin_token
    assert token
    with service.client(token) as client:
        job = submit(client, seq2seq_program["id"], RESTART_PLAN)
        wait_status(client, job["id"], "running")
    service.kill()  # SIGKILL: no shutdown hook runs; the workers see their parent die

    service.start()
    with service.client(token) as client:
        done = wait_job(client, job["id"], timeout=240)
    assert done["status"] in {"succeeded", "failed"}, done
    if done["status"] == "failed":
        assert done["error"]["code"] and done["error"]["message"]
    else:
        assert done["artifact_id"]
