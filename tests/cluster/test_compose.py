"""The compose deployment: its file refuses to start without a database password, and its
HAProxy configuration is valid (``docker compose config`` only: no image is pulled)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster.haproxy import CONFIG, haproxy_binary

COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "compose.yaml"


def _compose_command() -> list[str]:
    """``docker compose`` (v2) or ``docker-compose`` (v1), whichever this machine has."""
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    if legacy := shutil.which("docker-compose"):
        return [legacy]
    pytest.skip("docker compose is not installed here")


def _config(password: str | None, **more: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PTEFORGE_DB_PASSWORD"}
    if password is not None:
        env["PTEFORGE_DB_PASSWORD"] = password
    env.update(more)
    command = [*_compose_command(), "-f", str(COMPOSE), "config"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_compose_needs_a_password_and_has_every_role() -> None:
    refused = _config(None)
    assert refused.returncode != 0 and "PTEFORGE_DB_PASSWORD" in refused.stderr
    done = _config("not-a-default")
    assert done.returncode == 0, done.stderr
    for role in ("db:", "migrate:", "api:", "worker:", "lb:"):
        assert f"\n  {role}" in done.stdout
    assert "--no-workers" in done.stdout and "service_completed_successfully" in done.stdout
    assert "not-a-default@db:5432" in done.stdout


def test_the_replicas_get_the_metrics_token() -> None:
    """deployment.md says to set PTEFORGE_METRICS_TOKEN; compose passed it to no replica, so
    /metrics stayed open behind the published load balancer port."""
    done = _config("not-a-default", PTEFORGE_METRICS_TOKEN="scrape-7f3a")
    assert done.returncode == 0, done.stderr
    assert "PTEFORGE_METRICS_TOKEN: scrape-7f3a" in done.stdout


def test_the_load_balancer_configuration_is_valid() -> None:
    env = {**os.environ, "PTEFORGE_LB_BIND": ":8000", "PTEFORGE_LB_GRPC_BIND": ":8001"}  # checked
    checked = subprocess.run(
        [haproxy_binary(), "-c", "-f", str(CONFIG)], env=env, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
