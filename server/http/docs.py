"""``/docs`` (Swagger UI) and ``/redoc`` from local files, so they work with no internet.

FastAPI's own pages load their scripts and styles from a CDN: behind a firewall, or offline,
they are blank. The same files ship in the ``fastapi-offline`` package; they are served here
under ``/docs-assets`` and the pages point at them. Like the pages, the files need no token.

Each page's Content-Security-Policy keeps it to the server's own origin: ReDoc's bundle
hard-codes a branding image on a CDN, which the browser then drops without asking for it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
ASSETS_URL = "/docs-assets"
ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))
SWAGGER_JS = f"{ASSETS_URL}/swagger-ui-bundle.js"
SWAGGER_CSS = f"{ASSETS_URL}/swagger-ui.css"
REDOC_JS = f"{ASSETS_URL}/redoc.standalone.js"
FAVICON = f"{ASSETS_URL}/favicon.png"


_POLICY = (
    "default-src 'self'; script-src 'self'{scripts}; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; object-src 'none'; "
    "frame-ancestors 'none'"
)
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _own_origin_only(page: HTMLResponse) -> HTMLResponse:
    """``page`` with a policy that allows the server's files and the page's own inline
    script (by its hash), and nothing from another host."""
    hashes = "".join(
        f" 'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
        for script in _INLINE_SCRIPT.findall(bytes(page.body).decode())
    )
    page.headers["Content-Security-Policy"] = _POLICY.format(scripts=hashes)
    page.headers["X-Content-Type-Options"] = "nosniff"
    return page


def _root(request: Request) -> str:
    """The path prefix a proxy mounts the service under (as FastAPI's own pages use it)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def install_docs(app: FastAPI) -> None:
    """Serve Swagger UI and ReDoc for ``app.openapi_url`` (create ``app`` with
    ``docs_url=None, redoc_url=None`` so FastAPI's CDN pages are not also there)."""
    openapi_url = app.openapi_url or "/openapi.json"
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = _root(request)
        page = get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=root + SWAGGER_JS,
            swagger_css_url=root + SWAGGER_CSS,
            swagger_favicon_url=root + FAVICON,
            oauth2_redirect_url=None,  # bearer tokens only: no OAuth2 flow to return to
            # The online validator badge would fetch from validator.swagger.io.
            swagger_ui_parameters={"validatorUrl": None},
        )
        return _own_origin_only(page)

    @app.get(REDOC_URL, include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = _root(request)
        page = get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=root + REDOC_JS,
            redoc_favicon_url=root + FAVICON,
            with_google_fonts=False,
        )
        return _own_origin_only(page)
