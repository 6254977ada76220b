"""The README's quickstart blocks, run verbatim with bash from a fresh checkout's point of view
(``.venv`` beside them) against a real server: the curl block uploads, compiles, downloads and
ends with the answer of a ``/v2`` call that computes what the uploaded program computes; the
command-line block then logs in, pushes the same archive and builds it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.docs.blocks import CLI_MARKER, ROOT, quickstart
from tests.server.service import ServiceProcess

_INPUT = [[1.0, 2.0, 3.0, 4.0]]  # what the block's /v2 call sends


@dataclass(frozen=True)
class Shell:
    """A directory beside a ``.venv`` like a fresh clone's, with the server's URL and token
    exported as the README asks."""

    cwd: Path
    env: dict[str, str]

    def run(self, block: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,  # a guard against a hang, not a measurement
        )
        assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        return done


@pytest.fixture(scope="module")
def shell(service: ServiceProcess, tmp_path_factory: pytest.TempPathFactory) -> Shell:
    cwd = tmp_path_factory.mktemp("fresh-clone")
    (cwd / ".venv").symlink_to(ROOT / ".venv")
    assert service.admin_token, "first start printed no admin token"
    env = {
        **os.environ,
        "PTEFORGE_URL": service.url,
        "PTEFORGE_TOKEN": service.admin_token,
        "PTEFORGE_CONFIG": str(cwd / "client.json"),  # what login saves, kept out of $HOME
    }
    return Shell(cwd, env)


@pytest.fixture(scope="module")
def quickstart_output(shell: Shell) -> str:
    block = quickstart()
    assert len(block.splitlines()) <= 12, "the quickstart stays about ten lines"
    return shell.run(block).stdout


def test_the_quickstart_ends_with_a_v2_answer(
    quickstart_output: str, shell: Shell, service: ServiceProcess
) -> None:
    answer = json.loads(quickstart_output.strip().splitlines()[-1])
    (output,) = answer["outputs"]
    expected = torch.export.load(shell.cwd / "lin.pt2").module()(torch.tensor(_INPUT))
    got = np.asarray(output["data"], dtype=np.float32).reshape(output["shape"])
    np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert "event: end" in quickstart_output  # the job's stages streamed before the answer
    artifact = answer["model_name"].split(".")[0]
    with service.client(service.admin_token) as http:
        sha = http.get(f"/v1/artifacts/{artifact}").raise_for_status().json()["sha256"]
    assert hashlib.sha256((shell.cwd / "lin.pte").read_bytes()).hexdigest() == sha


def test_the_command_line_quickstart_builds_the_same_archive(
    quickstart_output: str, shell: Shell
) -> None:
    (shell.cwd / "lin.pte").unlink()
    done = shell.run(quickstart(CLI_MARKER))
    assert "succeeded" in done.stdout + done.stderr
    assert (shell.cwd / "lin.pte").stat().st_size > 0
    assert json.loads((shell.cwd / "client.json").read_text())["token"]
