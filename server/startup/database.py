"""Opening the store the settings name (the embedded SQLite file unless a URL is given)."""

from __future__ import annotations

from pteforge.server.settings import Settings
from pteforge.storage import default_sqlite_url, open_store
from pteforge.storage.store import Store


def database_url(settings: Settings) -> str:
    """``PTEFORGE_DATABASE_URL``, or the SQLite file under ``PTEFORGE_HOME``."""
    return settings.database_url or default_sqlite_url(settings.home)


def shown_database_url(settings: Settings) -> str:
    """The database URL for messages to users: its password, if any, hidden."""
    from sqlalchemy.engine import make_url

    return make_url(database_url(settings)).render_as_string(hide_password=True)


def open_service_store(settings: Settings, *, migrate: bool = True) -> Store:
    """The store for ``settings``; the server migrates the schema, workers just connect."""
    settings.home.mkdir(parents=True, exist_ok=True)
    return open_store(database_url(settings), migrate=migrate)


def open_for_command(settings: Settings, command: str) -> Store:
    """``open_service_store`` for ``pteforge COMMAND``: a database it cannot open or migrate
    (unreachable, refused credentials, a schema from a newer pteforge) ends the command with
    one line naming the database and the reason, not a traceback."""
    from pteforge.storage.errors import StorageError

    try:
        return open_service_store(settings)
    except StorageError as exc:
        where = shown_database_url(settings)
        raise SystemExit(f"pteforge {command}: database {where}: {exc}") from None
