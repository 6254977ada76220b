"""The README's quickstart block, run verbatim with bash from a fresh checkout's point of view
(``.venv`` beside it) against a real server: it uploads, compiles, downloads and ends with the
answer of a ``/v2`` call that computes what the uploaded program computes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import torch

from tests.docs.blocks import ROOT, quickstart
from tests.server.service import ServiceProcess

_INPUT = [[1.0, 2.0, 3.0, 4.0]]  # what the block's /v2 call sends


def _run(block: str, cwd: Path, service: ServiceProcess) -> subprocess.CompletedProcess[str]:
    (cwd / ".venv").symlink_to(ROOT / ".venv")
    assert service.admin_token, "first start printed no admin token"
    env = {**os.environ, "PTEFORGE_URL": service.url, "PTEFORGE_TOKEN": service.admin_token}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # a guard against a hang, not a measurement
    )


def test_the_quickstart_runs_verbatim(service: ServiceProcess, tmp_path: Path) -> None:
    block = quickstart()
    assert len(block.splitlines()) <= 12, "the quickstart stays about ten lines"
    done = _run(block, tmp_path, service)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    (output,) = answer["outputs"]
    expected = torch.export.load(tmp_path / "lin.pt2").module()(torch.tensor(_INPUT))
    got = np.asarray(output["data"], dtype=np.float32).reshape(output["shape"])
    np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert "event: end" in done.stdout  # the job's stages streamed before the answer
    artifact = answer["model_name"].split(".")[0]
    with service.client(service.admin_token) as http:
        sha = http.get(f"/v1/artifacts/{artifact}").raise_for_status().json()["sha256"]
    assert hashlib.sha256((tmp_path / "lin.pte").read_bytes()).hexdigest() == sha
