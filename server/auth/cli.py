"""``pteforge tokens create|list|revoke``: token administration against the service database.

These commands open the database directly, so each says on stderr which database it used:
a token made in another ``PTEFORGE_HOME`` than the server's is a token the server never sees.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pteforge.cli import add_command
from pteforge.server.startup.bootstrap import DEFAULT_PROJECT

if TYPE_CHECKING:
    from pteforge.storage.domain import Project
    from pteforge.storage.store import Transaction


def register(subparsers: Any) -> None:
    """Add ``tokens`` with its ``create``, ``list`` and ``revoke`` actions."""
    tokens = add_command(
        subparsers,
        "tokens",
        "manage API tokens (in the service database)",
        "Create, list and revoke API tokens, directly in the service's database: run it with "
        "the same PTEFORGE_HOME (or PTEFORGE_DATABASE_URL) as `pteforge serve`.",
        "pteforge tokens create --name laptop",
    )
    actions = tokens.add_subparsers(dest="tokens_action", required=True)
    create = add_command(
        actions,
        "create",
        "create a token; prints it as the last line",
        "Create a token for a project and print it as the last line (shown only now).",
        "pteforge tokens create --name laptop",
        create_command,
    )
    create.add_argument("--name", required=True, help="what the token is for (shown by list)")
    _project_option(create, "the project the token works in, created if missing")
    listing = add_command(
        actions,
        "list",
        "list a project's tokens (never their values)",
        "List a project's tokens: id, name, created, revoked (never their values).",
        "pteforge tokens list --project default",
        list_command,
    )
    _project_option(listing, "whose tokens")
    revoke = add_command(
        actions,
        "revoke",
        "revoke a token by id; it stops working at once",
        "Revoke a token by its id (from `pteforge tokens list`); requests with it are refused "
        "at once.",
        "pteforge tokens revoke tok_...",
        revoke_command,
    )
    revoke.add_argument("token_id", help="the token's id, as `pteforge tokens list` shows it")
    _project_option(revoke, "the token's project")


def _project_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--project", default=DEFAULT_PROJECT, help=f"{what} (default: {DEFAULT_PROJECT})"
    )


@contextmanager
def _in_project(name: str, *, create: bool = False) -> Iterator[tuple[Transaction, Project]]:
    """A transaction on the service's database and its project ``name``, after telling the
    user which database it is. Only ``create`` makes a missing database or project: for
    ``list`` and ``revoke`` one is a wrong PTEFORGE_HOME or ``--project`` (exit 2)."""
    from sqlalchemy.engine import make_url

    from pteforge.server.settings import settings_from_environment
    from pteforge.server.startup import database

    settings = settings_from_environment("tokens")
    print(f"database: {database.shown_database_url(settings)}", file=sys.stderr)
    url = make_url(database.database_url(settings))
    if not create and url.get_backend_name() == "sqlite" and not Path(url.database or "").exists():
        _refuse(f"no database at {url.database}: {_SAME_DATABASE}")
    store = database.open_for_command(settings, "tokens")
    try:
        with store.transaction() as tx:
            project = tx.projects.get_or_create(name) if create else tx.projects.get_by_name(name)
            if project is None:
                _refuse(f"no project {name!r} in this database")
            yield tx, project
    finally:
        store.close()


_SAME_DATABASE = (
    "run it with the PTEFORGE_HOME (or PTEFORGE_DATABASE_URL) of `pteforge serve`, which "
    "prints its database when it starts"
)


def _refuse(message: str) -> NoReturn:
    print(f"pteforge tokens: {message}", file=sys.stderr)
    raise SystemExit(2)


def create_command(args: argparse.Namespace) -> int:
    """Create a token for ``--project`` and print it (last line) for scripts."""
    with _in_project(args.project, create=True) as (tx, project):
        issued = tx.tokens.create(project.id, args.name)
    print(f"token {args.name!r} for project {project.name!r} ({project.id}):")
    print(issued.plaintext)
    return 0


def list_command(args: argparse.Namespace) -> int:
    """One line per token of ``--project``: id, name, created, revoked."""
    with _in_project(args.project) as (tx, project):
        tokens = tx.tokens.list(project.id)
    for token in tokens:
        revoked = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "active"
        print(f"{token.id}\t{token.name}\tcreated {token.created_at:%Y-%m-%d %H:%M}\t{revoked}")
    return 0


def revoke_command(args: argparse.Namespace) -> int:
    """Revoke a token of ``--project``; an unknown id is an error (exit 2)."""
    with _in_project(args.project) as (tx, project):
        found = tx.tokens.revoke(project.id, args.token_id)
    if not found:
        print(f"pteforge tokens: no token {args.token_id!r} in project {args.project!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    print(f"revoked {args.token_id}")
    return 0
