"""The ``serve``, ``worker`` and ``migrate`` subcommands (``tokens`` is in auth/cli.py)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pteforge.cli import add_command

if TYPE_CHECKING:
    from pteforge.server.settings import Settings


def register(subparsers: Any) -> None:
    """Add ``serve``, ``worker`` and ``migrate`` to the top-level parser."""
    _add_serve(subparsers)
    worker = add_command(
        subparsers,
        "worker",
        "compile queued jobs on this machine, for a server started with --no-workers",
        "Run compile workers in the foreground, without the HTTP service: they claim jobs from "
        "the database that `pteforge serve --no-workers` queues them in (PostgreSQL via "
        "PTEFORGE_DATABASE_URL to share it between machines).",
        "PTEFORGE_DATABASE_URL=postgresql+psycopg://... pteforge worker --count 2",
        worker_command,
    )
    worker.add_argument(
        "--count",
        type=int,
        default=None,
        help="how many jobs to compile at once, one worker process each (default: "
        "PTEFORGE_COMPILE_WORKERS)",
    )
    add_command(
        subparsers,
        "migrate",
        "bring the database schema up to date",
        "Apply the database's pending schema migrations and exit (serve and worker also do it "
        "when they start; a deployment runs it once before starting its replicas).",
        "PTEFORGE_DATABASE_URL=postgresql+psycopg://... pteforge migrate",
        migrate_command,
    )


def _add_serve(subparsers: Any) -> None:
    serve = add_command(
        subparsers,
        "serve",
        "run the HTTP service and its compile workers",
        "Run the HTTP service (API, dashboard, metrics) with its compile workers and runtime "
        "workers, on the database of PTEFORGE_HOME (default ~/.pteforge) or "
        "PTEFORGE_DATABASE_URL. On first start it creates a project and prints an admin token.",
        "pteforge serve --host 0.0.0.0 --port 8000",
        serve_command,
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 for "
        "every interface)",
    )
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    serve.add_argument(
        "--grpc-port",
        type=int,
        default=None,
        help="port of the gRPC frontend, for tritonclient.grpc (default: PTEFORGE_GRPC_PORT, "
        "else 8001; 0 turns gRPC off)",
    )
    serve.add_argument(
        "--no-workers",
        action="store_true",
        help="API only: compile workers run elsewhere (`pteforge worker`) on the same database",
    )


def serve_command(args: argparse.Namespace) -> int:
    """Run uvicorn on the app (workers start and stop with its lifespan)."""
    import uvicorn

    from pteforge.server.app import create_app
    from pteforge.server.http.bounded_httptools import DrainingServer, uvicorn_options
    from pteforge.server.startup.database import open_for_command

    settings = serve_settings(args)
    open_for_command(settings, "serve").close()  # migrated, or one line on why not
    _check_ports(settings)
    print(startup_help(settings), file=sys.stderr, flush=True)
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, _exit_cleanly)
    app = create_app(settings)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level="info", **uvicorn_options(settings)
    )
    server = DrainingServer(config, app)
    server.run()
    return 0 if server.started else 3  # what uvicorn.run exits with when startup failed


def serve_settings(args: argparse.Namespace) -> Settings:
    """The environment's settings with ``serve``'s options applied: ``--host`` also for gRPC
    and the URL the help prints, unless ``PTEFORGE_GRPC_HOST`` or ``PTEFORGE_PUBLIC_URL`` say
    otherwise."""
    from pteforge.server.settings import settings_from_environment

    settings = settings_from_environment("serve")
    if "PTEFORGE_PUBLIC_URL" not in os.environ:
        settings.public_url = public_url(args.host, args.port)
    if "PTEFORGE_GRPC_HOST" not in os.environ:
        settings.grpc_host = args.host
    if args.no_workers:
        settings.compile_workers = 0
    if args.grpc_port is not None:
        settings.grpc_port = args.grpc_port
    return settings


def _check_ports(settings: Settings) -> None:
    """A taken gRPC port ends ``serve`` with one line before anything starts (in the
    lifespan, uvicorn printed the same error inside a traceback)."""
    from pteforge.server.grpc_api.server import GrpcPortError, check_grpc_port

    if settings.grpc_port:
        try:
            check_grpc_port(settings.grpc_host, settings.grpc_port)
        except GrpcPortError as exc:
            raise SystemExit(f"pteforge serve: {exc}") from None


def _exit_cleanly(signum: int, frame: object) -> None:
    """Ctrl-C or SIGTERM while uvicorn is not serving ends ``serve`` with status 0: before
    it starts, and after its graceful shutdown, when it raises the signal it caught again
    (under the handler it found, this one)."""
    raise SystemExit(0)


def startup_help(settings: Settings) -> str:
    """Which database this server uses, and how tokens and clients connect to it: a token is
    valid only if it was created in this same database."""
    from pteforge.cli import command_name
    from pteforge.server.startup.database import shown_database_url

    pteforge = command_name()
    where = (
        "PTEFORGE_DATABASE_URL=..."
        if settings.database_url
        else f"PTEFORGE_HOME={settings.home.expanduser()}"
    )
    url = settings.public_url
    if urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1"):
        then = f"from this machine only (--host 0.0.0.0 for others): {pteforge}"
    else:
        then = "from any machine: pteforge"
    return (
        f"pteforge serve: database {shown_database_url(settings)}\n"
        f"  tokens for this server: {where} {pteforge} tokens create --name NAME\n"
        f"  then, {then} login {url} --token TOKEN"
    )


def public_url(host: str, port: int) -> str:
    """The server's URL for the help ``serve`` prints: a wildcard address (``0.0.0.0``) is
    nothing a client can connect to, so this machine's name stands for it."""
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def worker_command(args: argparse.Namespace) -> int:
    """Run compile workers in the foreground (migrating the schema first, as serve does)."""
    from pteforge.server.jobs.compile_workers import run_workers
    from pteforge.server.settings import settings_from_environment
    from pteforge.server.startup.database import open_for_command

    settings = settings_from_environment("worker")
    count = settings.compile_workers if args.count is None else args.count
    if count < 1:
        raise SystemExit("pteforge worker: --count must be at least 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    open_for_command(settings, "worker").close()
    run_workers(settings, count)
    return 0


def migrate_command(args: argparse.Namespace) -> int:
    """Apply pending migrations and exit (a deployment runs this once before its replicas)."""
    from pteforge.server.settings import settings_from_environment
    from pteforge.server.startup.database import open_for_command

    open_for_command(settings_from_environment("migrate"), "migrate").close()
    print("database schema is up to date")
    return 0
