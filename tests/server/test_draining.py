"""SIGTERM stops ``pteforge serve`` while a client follows a job's event stream: the stream
closes with no ``end`` (the client resumes elsewhere with ``Last-Event-ID``), and the server
exits 0. Before, uvicorn's graceful shutdown waited for the stream, which runs until its job
ends: with the job queued and no worker, the replica never stopped."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from tests.cluster.programs import tiny_program_file
from tests.server.helpers import submit, upload_methods
from tests.server.service import running_service

pytestmark = pytest.mark.server


def test_sigterm_ends_an_event_stream_and_the_server(tmp_path: Path) -> None:
    env = {"PTEFORGE_COMPILE_WORKERS": "0", "PTEFORGE_RUNTIME_POOL_SIZE": "1"}  # stays queued
    with running_service(tmp_path / "home", env) as svc, svc.client(svc.admin_token) as client:
        program = upload_methods(client, {"forward": tiny_program_file(tmp_path, 1)})
        job = submit(client, program["id"], {"all": {"partitioners": []}})
        with client.stream("GET", f"/v1/jobs/{job['id']}/events") as stream:
            lines = stream.iter_lines()
            assert next(line for line in lines if line.startswith("event:")) == "event: job"
            assert svc.proc is not None
            svc.proc.send_signal(signal.SIGTERM)
            rest: list[str] = []
            reader = threading.Thread(target=lambda: rest.extend(lines), daemon=True)
            reader.start()  # ends when the server closes the stream
            reader.join(timeout=120)
            assert not reader.is_alive(), "the event stream held the stopping server"
        assert "event: end" not in rest
        assert svc.proc.wait(timeout=120) == 0
