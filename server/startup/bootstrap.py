"""First start: an empty database gets a project and an admin token, printed once."""

from __future__ import annotations

from dataclasses import dataclass

from pteforge.cli import command_name
from pteforge.storage.errors import ConflictError
from pteforge.storage.store import Store

DEFAULT_PROJECT = "default"
ADMIN_TOKEN_NAME = "admin"


@dataclass(frozen=True)
class Bootstrap:
    """What first start created (the plaintext token exists nowhere else)."""

    project_name: str
    token: str


def bootstrap_if_empty(store: Store) -> Bootstrap | None:
    """Create the default project and its admin token unless the project already exists
    (replicas starting together on one database: the one that loses the race gets None)."""
    try:
        with store.transaction() as tx:
            if tx.projects.get_by_name(DEFAULT_PROJECT) is not None:
                return None
            project = tx.projects.create(DEFAULT_PROJECT)
            issued = tx.tokens.create(project.id, ADMIN_TOKEN_NAME)
    except ConflictError:
        return None
    return Bootstrap(project_name=project.name, token=issued.plaintext)


def usage_text(boot: Bootstrap, base_url: str) -> str:
    """How to use the token just created (the ``pteforge`` commands as a shell here finds
    them: ``.venv/bin/pteforge`` when the virtual environment is not on ``PATH``)."""
    pteforge = command_name()
    return (
        f"Created project {boot.project_name!r} and an admin token (shown only now):\n"
        f"  {boot.token}\n"
        f"Use it as a bearer token, e.g.:\n"
        f"  curl -H 'Authorization: Bearer {boot.token}' {base_url}/v1/backends\n"
        f"or save it for the Python client and the remote commands:\n"
        f"  {pteforge} login {base_url} --token {boot.token}\n"
        f"More tokens: {pteforge} tokens create --name NAME [--project PROJECT]\n"
    )
