"""The ``pteforge`` command line: one entry point, each subcommand owned by its layer.

Subcommands import their layer lazily so that ``pteforge compile`` never loads the
HTTP stack and ``pteforge serve`` starts without importing the compiler up front.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand -> module providing ``register(subparsers)`` for it
_COMMAND_MODULES: dict[str, str] = {
    "compile": "pteforge.manager.cli",
    "serve": "pteforge.server.cli",
    "tokens": "pteforge.server.auth.cli",
    # remote commands: a client of a running server
    **dict.fromkeys(
        ("login", "push", "build", "pull", "run", "ls", "cancel"), "pteforge.client.cli"
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every layer's subcommands."""
    parser = argparse.ArgumentParser(prog="pteforge", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    seen: set[str] = set()
    for module_name in _COMMAND_MODULES.values():
        if module_name in seen:
            continue
        seen.add(module_name)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # layer not built yet
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
