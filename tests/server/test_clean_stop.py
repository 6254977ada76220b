"""A normal run of ``pteforge serve`` logs no warning and no traceback, and stops cleanly.

Its own server (not the package's shared one): a tiny program is uploaded and compiled, the
server gets SIGTERM (what ``make serve``'s Ctrl-C or a service manager sends), and then its
whole log is read: third-party import noise, the native thread pool's CPU probe and a
``runpy`` warning in every lowering child used to be in it, and the exit status was -15.
With the compile warm-up off, the worker starts its lowering fork server at its first job.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.cluster.programs import tiny_program_file
from tests.server.helpers import submit, upload_methods, wait_job
from tests.server.service import children_running, running_service, wait_until

pytestmark = pytest.mark.server

NOISE = re.compile(r"Warning|WARNING|Traceback|cpuinfo_utils")
FORK_SERVER = b"multiprocessing.forkserver"


def test_serve_compiles_and_stops_on_sigterm_with_a_clean_log(tmp_path: Path) -> None:
    env = {"PTEFORGE_COMPILE_WORKERS": "1", "PTEFORGE_RUNTIME_POOL_SIZE": "1"}
    with running_service(tmp_path / "home", env) as svc:
        (worker,) = wait_until(svc.worker_pids, 60, "the compile worker")
        # the tests' servers run with the compile warm-up off: no fork server before a job
        assert children_running(worker, FORK_SERVER) == []
        with svc.client(svc.admin_token) as client:
            program = upload_methods(client, {"forward": tiny_program_file(tmp_path, 1)})
            job = submit(client, program["id"], {"all": {"partitioners": ["xnnpack"]}})
            done = wait_job(client, job["id"])
        assert done["status"] == "succeeded", done
        assert len(children_running(worker, FORK_SERVER)) == 1
        assert svc.proc is not None
        svc.proc.send_signal(signal.SIGTERM)
        status = svc.proc.wait(timeout=120)
    log = svc.log_path.read_text()
    assert [line for line in log.splitlines() if NOISE.search(line)] == [], log
    assert "Finished server process" in log
    assert status == 0, log
