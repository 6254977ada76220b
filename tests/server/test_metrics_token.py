"""``PTEFORGE_METRICS_TOKEN`` reaches compile workers as the secret, not pydantic's mask
(what /metrics does with it: ``tests/runtime/test_metrics_token.py``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from pteforge.server.jobs.compile_workers import settings_env
from pteforge.server.settings import Settings

SECRET = "metrics-9f2c"


def test_compile_workers_read_the_token_not_its_mask(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, metrics_token=SecretStr(SECRET))
    assert settings_env(settings)["PTEFORGE_METRICS_TOKEN"] == SECRET
