"""Routes of the dashboard: ``/`` answers the page, ``/dashboard/*`` its static files.

The page holds no data: it signs in with a token kept in the browser's sessionStorage and
reads everything from the API with an ``Authorization: Bearer`` header. Its pages are hash
routes of ``/`` (``/#/jobs/ID``, ``/#/artifacts/ID``, ``static/routes.js``), so a page's URL
can be bookmarked, reloaded and shared, and the server serves no other path for them.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"

# No inline scripts and no third-party origins: the page loads only its own files.
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; "
        "script-src 'self'; connect-src 'self'; object-src 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
def dashboard_page() -> FileResponse:
    """The dashboard's single page."""
    return FileResponse(STATIC_DIR / "index.html", headers=_HEADERS)


def static_files() -> StaticFiles:
    """The page's scripts, styles and the vendored chart library."""
    return StaticFiles(directory=STATIC_DIR)


def mount_dashboard(app: FastAPI) -> None:
    """Add the page and its static files to ``app``."""
    app.include_router(router)
    app.mount("/dashboard", static_files(), name="dashboard")
