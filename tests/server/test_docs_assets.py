"""``/docs`` and ``/redoc`` name only the server's own files, which answer with no token
(the app is built, not started: no server, no database)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pteforge.server.app import create_app
from pteforge.server.settings import Settings

# Python's mimetypes names JavaScript either way, by version and the host's /etc/mime.types.
JAVASCRIPT = ("text/javascript", "application/javascript")
ASSETS = {
    "/docs-assets/swagger-ui-bundle.js": JAVASCRIPT,
    "/docs-assets/swagger-ui.css": ("text/css",),
    "/docs-assets/redoc.standalone.js": JAVASCRIPT,
    "/docs-assets/favicon.png": ("image/png",),
}
_REFERENCE = re.compile(r"""(?:src|href|spec-url)=["']([^"']+)["']|url: ?'([^']+)'""")
_ANY_URL = re.compile(r"""[a-z][a-z0-9+.-]*://[^\s"'<>)]*""", re.IGNORECASE)


@pytest.fixture(scope="module")
def anonymous_client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    """A client without a token, on an app whose lifespan never runs."""
    return TestClient(create_app(Settings(home=tmp_path_factory.mktemp("docs-home"))))


@pytest.mark.parametrize(("path", "content_types"), ASSETS.items())
def test_assets_are_served_without_a_token(
    anonymous_client: TestClient, path: str, content_types: tuple[str, ...]
) -> None:
    response = anonymous_client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] in content_types
    assert len(response.content) > 1000


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_pages_name_only_the_servers_own_files(anonymous_client: TestClient, page: str) -> None:
    response = anonymous_client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert _ANY_URL.findall(html) == []  # every reference is a path on this server
    references = [src or url for src, url in _REFERENCE.findall(html)]
    assert "/openapi.json" in references
    assert {path for path in references if path.startswith("/docs-assets/")} <= set(ASSETS)
    for path in references:
        assert anonymous_client.get(path).status_code == 200, path
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert _ANY_URL.findall(policy) == []


def test_pages_follow_the_root_path(tmp_path: Path) -> None:
    """Behind a proxy that mounts the service under a prefix, the pages name prefixed paths."""
    app = create_app(Settings(home=tmp_path))
    html = TestClient(app, root_path="/forge").get("/docs").text
    assert "'/forge/openapi.json'" in html
    assert 'src="/forge/docs-assets/swagger-ui-bundle.js"' in html
