"""Swagger UI (``/docs``) and ReDoc (``/redoc``) render with no network but the server's own:
every request to another host is refused, as behind a firewall with no internet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Route

from tests.server.service import ServiceProcess

WAIT_MS = 60_000  # a 1.5 MB script parsed on a loaded 2-core machine
# ReDoc's bundle hard-codes its branding image on a CDN; the page's policy stops it before any
# request is made, and ReDoc then leaves the image out.
REDOC_BRANDING = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@pytest.fixture
def offline_page(service: ServiceProcess, browser: Browser) -> Iterator[tuple[Page, list[str]]]:
    """A page whose requests to any host but the server's are aborted (and listed), and
    whose script errors and Content-Security-Policy refusals are listed too."""
    own = urlsplit(service.url).netloc
    refused: list[str] = []

    def only_the_server(route: Route) -> None:
        url = route.request.url
        if urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc != own:
            refused.append(url)
            route.abort()
        else:
            route.continue_()

    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.route("**/*", only_the_server)
    page.on("pageerror", lambda error: refused.append(f"script error: {error}"))

    def console_errors(message: ConsoleMessage) -> None:
        if message.type == "error" and REDOC_BRANDING not in message.text:
            refused.append(f"console: {message.text}")

    page.on("console", console_errors)
    try:
        yield page, refused
    finally:
        page.close()


def _operation_count(service: ServiceProcess) -> int:
    document = httpx.get(f"{service.url}/openapi.json", timeout=60).raise_for_status().json()
    return sum(len(operations) for operations in document["paths"].values())


def test_swagger_ui_renders_offline(
    service: ServiceProcess, offline_page: tuple[Page, list[str]], tmp_path: Path
) -> None:
    page, refused = offline_page
    page.goto(f"{service.url}/docs")
    page.wait_for_selector(".opblock", timeout=WAIT_MS)
    page.wait_for_selector(".opblock-summary-path[data-path='/v1/compile-jobs']", timeout=WAIT_MS)
    assert page.locator(".opblock").count() == _operation_count(service)
    page.screenshot(path=str(tmp_path / "swagger-ui.png"))
    assert refused == []


def test_redoc_renders_offline(
    service: ServiceProcess, offline_page: tuple[Page, list[str]], tmp_path: Path
) -> None:
    page, refused = offline_page
    page.goto(f"{service.url}/redoc")
    operations = page.locator("[data-section-id^='operation/']")
    operations.first.wait_for(timeout=WAIT_MS)
    assert operations.count() == _operation_count(service)
    assert "pteforge" in page.locator("h1").first.inner_text()
    page.screenshot(path=str(tmp_path / "redoc.png"))
    assert refused == []
