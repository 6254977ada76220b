"""``PTEFORGE_METRICS_TOKEN`` (red-team pass): /metrics answers every project's per-model
series (model names, artifact ids, request rates) to whoever reaches it; with the setting it
needs that bearer token. In process, without a lifespan: past the check, /metrics answers
503 (no runtime here), so the status says whether the check let the request through."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import SecretStr
from starlette.testclient import TestClient

from pteforge.server.app import create_app
from pteforge.server.jobs.compile_workers import settings_env
from pteforge.server.settings import Settings

SECRET = "metrics-9f2c"


def _client(tmp_path: Path, token: str | None) -> TestClient:
    settings = Settings(home=tmp_path, metrics_token=None if token is None else SecretStr(token))
    app = create_app(settings)
    app.state.services = SimpleNamespace(settings=settings)  # what the lifespan would set
    return TestClient(app)  # not started: no runtime pool


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Authorization": f"Basic {SECRET}"}, 401),
        ({"Authorization": f"Bearer {SECRET}x"}, 401),
        ({"Authorization": f"Bearer {SECRET}"}, 503),
    ],
)
def test_metrics_need_the_token_once_set(
    tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    answer = _client(tmp_path, SECRET).get("/metrics", headers=headers)
    assert answer.status_code == status, answer.text
    assert SECRET not in answer.text


def test_metrics_need_no_token_by_default(tmp_path: Path) -> None:
    assert _client(tmp_path, None).get("/metrics").status_code == 503


def test_compile_workers_read_the_token_not_its_mask(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, metrics_token=SecretStr(SECRET))
    assert settings_env(settings)["PTEFORGE_METRICS_TOKEN"] == SECRET
