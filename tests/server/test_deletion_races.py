"""Deleting a program while its compile job runs ends the job as a missing program does,
not as the worker's internal error (its content went mid-read, or the artifact row could not
refer to it)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.models import save_programs, small_mlp_programs
from tests.server.helpers import job_state, submit, upload_methods, wait_job
from tests.server.service import wait_until


def test_a_program_deleted_while_it_compiles_fails_its_job_as_not_found(
    admin: httpx.Client, tmp_path: Path
) -> None:
    files = save_programs(small_mlp_programs().programs, tmp_path)
    program = upload_methods(admin, files, name="deleted-while-compiling")
    jobs = [submit(admin, program["id"], {"all": {}}) for _ in range(2)]  # one may reuse
    wait_until(
        lambda: job_state(admin, jobs[0]["id"])["status"] != "queued", 120, "the job to start"
    )
    assert admin.delete(f"/v1/programs/{program['id']}").status_code == 204
    for job in jobs:
        done = wait_job(admin, job["id"])
        # a job that stored its artifact before the delete succeeds; none is an internal error
        if done["status"] != "succeeded":
            assert done["error"]["code"] == "not_found", done
            assert program["id"] in done["error"]["message"], done
