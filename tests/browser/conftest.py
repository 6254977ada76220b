"""Fixtures of the browser tests: Debian's chromium (installed with apt-get when missing),
driven by Playwright, against a real ``pteforge serve`` over a socket."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.server.service import ServiceProcess

CHROMIUM = Path("/usr/bin/chromium")
# Playwright's own browser download cannot be reached: drive the distribution's build, with
# nothing in it that calls out to the network.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _apt_get(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["apt-get", *args],
        capture_output=True,
        text=True,
        env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        timeout=900,
    )


def ensure_chromium() -> Path:
    """Debian's chromium, installed when missing (an error, never a skip, if it cannot be)."""
    if CHROMIUM.exists():
        return CHROMIUM
    if shutil.which("apt-get") is None:
        pytest.fail("chromium is missing and there is no apt-get to install it")
    if _apt_get("install", "-y", "chromium").returncode != 0:
        _apt_get("update")
        result = _apt_get("install", "-y", "chromium")
        if result.returncode != 0:
            pytest.fail(f"apt-get install chromium failed:\n{result.stderr[-2000:]}")
    return CHROMIUM


@pytest.fixture(scope="package")
def service(shared_service: ServiceProcess) -> ServiceProcess:
    """The server of this test process, shared with other packages (``tests/conftest.py``);
    each module started its own before."""
    return shared_service


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless chromium under Playwright's sync API."""
    executable = ensure_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(executable), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="package")  # once per server: it deploys version 1 of its name
def chat_model(service: ServiceProcess) -> str:
    """The tiny Llama of ``tests.generation.lm_builder`` (cached per machine) uploaded as a
    ``.pte``, deployed as version 1 of a model with its tokenizer and chat template: the
    name of that model. Its users carry the ``zoo`` marker."""
    from tests.generation.lm_builder import build_tiny_lm

    lm = build_tiny_lm("llama")  # the cache's own files, only read
    name = "browser-lm"
    files = {"tokenizer": lm.tokenizer_json, "tokenizer_config": lm.tokenizer_config}
    with service.client(service.admin_token) as api:
        artifact = api.post("/v1/artifacts", files={"pte": ("model.pte", lm.pte.read_bytes())})
        assert artifact.status_code == 201, artifact.text
        body = {"artifact_id": artifact.json()["id"]}
        version = api.post(f"/v1/models/{name}/versions", json=body)
        assert version.status_code == 201, version.text
        parts = {part: (path.name, path.read_bytes()) for part, path in files.items()}
        tokenizer = api.put(f"/v1/models/{name}/versions/1/tokenizer", files=parts)
        assert tokenizer.status_code == 201, tokenizer.text
    return name
