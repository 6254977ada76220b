"""Compiles sent back to back run on warm lowering processes (issue 20).

With the compile warm-up on (as ``pteforge serve`` runs by default), a worker's fork server
lowers a tiny program once; each job's lowering process is forked from it, warm, and takes
its job without a warm-up of its own. Read from the worker's log lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from tests.models import MLP, export_methods, save_programs
from tests.server.helpers import submit, upload_methods, wait_job
from tests.server.service import ServiceProcess, running_service

pytestmark = pytest.mark.server

PLAN = {"methods": {"forward": {"partitioners": ["xnnpack"]}}}


@pytest.fixture(scope="module")
def warm_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    home = tmp_path_factory.mktemp("warm-compiles") / "home"
    env = {"PTEFORGE_COMPILE_WORKERS": "1", "PTEFORGE_COMPILE_WARMUP": "true"}
    with running_service(home, env) as svc:
        yield svc


def _mlp_program(client: httpx.Client, directory: Path, seed: int) -> str:
    torch.manual_seed(seed)
    programs = export_methods(MLP(), {"forward": (torch.randn(1, 16),)}).programs
    return str(upload_methods(client, save_programs(programs, directory), f"mlp{seed}")["id"])


def _compiled(client: httpx.Client, program_id: str) -> dict[str, Any]:
    job = wait_job(client, submit(client, program_id, PLAN)["id"])
    assert job["status"] == "succeeded", job
    artifact = client.get(f"/v1/artifacts/{job['artifact_id']}").json()
    assert artifact["numerics"]["status"] == "passed", artifact["numerics"]  # against eager
    return dict(job)


def _lines_of(log: list[str], job_id: str) -> list[str]:
    """The log lines from the job's claim to its first lowering stage."""
    start = next(i for i, line in enumerate(log) if f"job {job_id} claimed" in line)
    end = next(i for i, line in enumerate(log) if f"job {job_id}: to_edge" in line)
    return log[start:end]


def test_back_to_back_jobs_take_warm_lowering_processes(
    warm_service: ServiceProcess, tmp_path: Path
) -> None:
    with warm_service.client(warm_service.admin_token) as client:
        programs = [_mlp_program(client, tmp_path / str(seed), seed) for seed in (1, 2)]
        jobs = [_compiled(client, program) for program in programs]  # each right after the last
    log = warm_service.log_path.read_text().splitlines()
    warm_ups = [line for line in log if "warmed up in" in line]
    assert len(warm_ups) == 1 and re.search(r"lowering fork server \d+ warmed up", warm_ups[0])
    assert not [line for line in log if "WARNING lowering fork server" in line]
    for job in jobs:  # no warm-up between the claim and the lowering: the process was warm
        between = _lines_of(log, job["id"])
        assert not [line for line in between if "warm" in line], between
    ready = [line for line in log if re.search(r"lowering process \d+ ready in", line)]
    assert len(ready) >= len(jobs)  # one per job; the next one may still be starting
