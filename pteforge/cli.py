"""The ``pteforge`` command line: one entry point, each subcommand owned by its layer.

Subcommands import their layer lazily so that ``pteforge compile`` never loads the
HTTP stack and ``pteforge serve`` starts without importing the compiler up front.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

DESCRIPTION = """\
Compile torch.export programs to ExecuTorch .pte files and run them: on this machine
(compile), as a service (serve, worker, migrate, tokens), or as a client of a running
service (login, push, build, pull, deploy, run, profile, chat, ls, show, rm,
cancel)."""
EPILOG = """first hour:
  pteforge serve                                  # prints an admin token on first start
  pteforge login 127.0.0.1:8000 --token ptf_...   # saves the server and token
  pteforge push mymodel forward=model.pt2         # upload a torch.export archive
  pteforge build mymodel -o model.pte             # compile it on the server
  pteforge run art_....forward --input x.npy      # run a method of the artifact

`pteforge COMMAND --help` describes each command."""

# subcommand -> module providing ``register(subparsers)`` for it
_COMMAND_MODULES: dict[str, str] = {
    "compile": "pteforge.manager.cli",
    "serve": "pteforge.server.cli",
    "tokens": "pteforge.server.auth.cli",
    # remote commands: a client of a running server
    **dict.fromkeys(
        ("login", "push", "build", "pull", "deploy", "run", "ls", "show", "rm", "cancel"),
        "pteforge.client.cli",
    ),
}


Handler = Callable[[argparse.Namespace], int]


def add_command(
    subparsers: Any,
    name: str,
    help: str,
    description: str,
    example: str,
    handler: Handler | None = None,
    footer: str = "",
    parents: Sequence[argparse.ArgumentParser] = (),
) -> argparse.ArgumentParser:
    """Add subcommand ``name`` (run by ``handler``) and return its parser: ``help`` in the
    list of commands; its ``--help`` shows ``description`` (wrapped), ``example`` on a line
    of its own, then ``footer`` as written; it takes the options of ``parents`` too."""
    blocks = [textwrap.fill(description, 88), f"example:\n  {example}", footer]
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description="\n\n".join(block for block in blocks if block),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=list(parents),
    )
    if handler is not None:
        parser.set_defaults(handler=handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every layer's subcommands."""
    parser = argparse.ArgumentParser(
        prog="pteforge",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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


def command_name() -> str:
    """How to type ``pteforge`` in a shell here, for the commands a banner shows: the script
    of the running virtual environment when ``PATH`` does not find it (``.venv/bin/pteforge``
    after ``make serve`` in a fresh clone: relative when the environment is a folder of the
    current directory, else absolute), else ``pteforge``."""
    if sys.prefix == sys.base_prefix:
        return "pteforge"  # not in a virtual environment: installed where PATH looks
    script = Path(sys.prefix) / "bin" / "pteforge"
    found = shutil.which("pteforge")
    if not script.is_file() or (found and Path(found).resolve() == script.resolve()):
        return "pteforge"
    if script.parent.parent.parent.absolute() == Path.cwd().absolute():
        return os.path.relpath(script)
    return str(script.absolute())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    from pteforge.children.limits import FP32_CPU_ENV
    from pteforge.quiet import quiet_third_party

    for name, value in FP32_CPU_ENV.items():  # before any OpenVINO plugin reads the CPU
        os.environ.setdefault(name, value)
    quiet_third_party()
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
