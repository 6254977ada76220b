"""The README's Python quickstart runs as printed, in at most 10 lines, against a real server."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.server.service import ServiceProcess

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    section = README.read_text().split("<!-- quickstart-python -->", 1)[1]
    match = re.match(r"\s*```python\n(.*?)```", section, re.DOTALL)
    assert match, "no python block right after <!-- quickstart-python --> in the README"
    return match.group(1)


def test_the_readme_example_runs(
    service: ServiceProcess,
    token: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = _example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    monkeypatch.setenv("PTEFORGE_URL", service.url)
    monkeypatch.setenv("PTEFORGE_TOKEN", token)
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), scope)
    model, x, y = scope["model"], scope["x"], scope["y"]
    assert isinstance(model, torch.nn.Module) and isinstance(x, torch.Tensor)
    np.testing.assert_allclose(y, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)
    assert (tmp_path / "mlp.pte").stat().st_size > 0
    assert "succeeded" in capsys.readouterr().out  # on_stage=print showed the stages
