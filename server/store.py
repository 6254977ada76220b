"""Opening the store the settings name (the embedded SQLite file unless a URL is given)."""

from __future__ import annotations

from pteforge.server.settings import Settings
from pteforge.storage import default_sqlite_url, open_store
from pteforge.storage.store import Store


def database_url(settings: Settings) -> str:
    """``PTEFORGE_DATABASE_URL``, or the SQLite file under ``PTEFORGE_HOME``."""
    return settings.database_url or default_sqlite_url(settings.home)


def open_service_store(settings: Settings, *, migrate: bool = True) -> Store:
    """The store for ``settings``; the server migrates the schema, workers just connect."""
    settings.home.mkdir(parents=True, exist_ok=True)
    return open_store(database_url(settings), migrate=migrate)
