"""The ``serve`` and ``tokens`` subcommands of ``pteforge``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from pteforge.server.bootstrap import DEFAULT_PROJECT


def register(subparsers: Any) -> None:
    """Add ``serve`` and ``tokens`` to the top-level parser."""
    serve = subparsers.add_parser("serve", help="run the HTTP service and its compile workers")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.set_defaults(handler=serve_command)

    tokens = subparsers.add_parser("tokens", help="manage API tokens")
    actions = tokens.add_subparsers(dest="tokens_action", required=True)
    create = actions.add_parser("create", help="create a token; prints it as the last line")
    create.add_argument("--name", required=True)
    create.add_argument(
        "--project", default=DEFAULT_PROJECT, help="project name (created if missing)"
    )
    create.set_defaults(handler=tokens_create_command)


def serve_command(args: argparse.Namespace) -> int:
    """Run uvicorn on the app (workers start and stop with its lifespan)."""
    import uvicorn

    from pteforge.server.app import create_app
    from pteforge.server.settings import Settings

    settings = Settings()
    if "PTEFORGE_PUBLIC_URL" not in os.environ:
        settings.public_url = f"http://{args.host}:{args.port}"
    # httptools and uvloop (uvicorn[standard]) cut the per-request CPU of every /v2 call.
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level="info",
        http="httptools",
        loop="uvloop",
    )
    return 0


def tokens_create_command(args: argparse.Namespace) -> int:
    """Create a token for ``--project`` and print it (last line) for scripts."""
    from pteforge.server.settings import Settings
    from pteforge.server.store import open_service_store

    store = open_service_store(Settings())
    try:
        with store.transaction() as tx:
            project = tx.projects.get_or_create(args.project)
            issued = tx.tokens.create(project.id, args.name)
    finally:
        store.close()
    print(f"token {args.name!r} for project {project.name!r} ({project.id}):")
    print(issued.plaintext)
    return 0
