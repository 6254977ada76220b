"""The remote commands of ``pteforge``: ``login``, ``push``, ``build``, ``pull``, ``deploy``,
``run``, ``profile``, ``ls``, ``show``, ``rm`` and ``cancel``, each talking to a server through
:class:`pteforge.client.Client`.

Every command takes ``--json`` (machine-readable output on stdout); progress goes to stderr;
an error is one line on stderr with exit code 1 (2 for bad local input). This module only
builds the parser: the work (and the imports of httpx, numpy and rich) is in ``commands``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

EXIT_ERROR = 1
EXIT_BAD_INPUT = 2


REMOTE_FOOTER = """\
The server and token are those `pteforge login` saved, or PTEFORGE_URL and PTEFORGE_TOKEN.
Errors are one line on stderr (exit code 1; 2 for bad local input)."""
LOGIN_FOOTER = """\
The URL and token are saved in $PTEFORGE_CONFIG (default ~/.config/pteforge/client.json)
for the other remote commands; PTEFORGE_URL and PTEFORGE_TOKEN override them."""


class BadInputError(Exception):
    """Local input a command cannot use (exit code 2)."""


def register(subparsers: Any) -> None:
    """Add the remote commands to the top-level ``pteforge`` parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON on stdout (for scripts)")
    _login(subparsers, common)
    _push(subparsers, common)
    _build(subparsers, common)
    _pull(subparsers, common)
    _deploy(subparsers, common)
    _run(subparsers, common)
    _profile(subparsers, common)
    _ls(subparsers, common)
    _show(subparsers, common)
    _rm(subparsers, common)
    _cancel(subparsers, common)
    _chat(subparsers, common)


def _command(
    subparsers: Any,
    common: argparse.ArgumentParser,
    name: str,
    help: str,
    example: str,
    footer: str = REMOTE_FOOTER,
) -> Any:
    """A remote command: ``help`` in the list of commands; the description adds ``example``
    and ``footer`` (where the server and token come from)."""
    description = f"{help[0].upper()}{help[1:]}.\n\nexample:\n  {example}\n\n{footer}"
    parser = subparsers.add_parser(
        name,
        help=help,
        description=description,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=_dispatch)
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    from pteforge.client.commands import run_command

    return run_command(args)


def _login(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "login",
        "check a server URL and token, then save them for the other commands (mode 0600)",
        "pteforge login 127.0.0.1:8000 --token ptf_...",
        LOGIN_FOOTER,
    )
    parser.add_argument(
        "url", help="the server: http[s]://HOST[:PORT], or HOST:PORT for http (127.0.0.1:8000)"
    )
    parser.add_argument(
        "--token", help="an API token (default: $PTEFORGE_TOKEN, else asked for on stdin)"
    )


def _push(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "push",
        "upload a program: one torch.export .pt2 archive per method",
        "pteforge push mymodel forward=model.pt2",
    )
    parser.add_argument("name", help="the program's name")
    parser.add_argument(
        "methods", nargs="+", metavar="METHOD=FILE.pt2", help="a method and its archive"
    )


def _build(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "build",
        "compile an uploaded program to a .pte on the server, showing its stages live",
        'pteforge build mymodel --plan \'{"all": {"partitioners": ["xnnpack"]}}\' -o model.pte',
    )
    parser.add_argument("program", help="a program id, or the name of the newest such program")
    parser.add_argument(
        "--plan", default="{}", help="a plan file or inline JSON (default: {} = portable)"
    )
    parser.add_argument("-o", "--output", type=Path, help="also download the .pte here")
    parser.add_argument("--no-wait", action="store_true", help="queue the job and return")


def _pull(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "pull",
        "download an artifact's .pte (its sha256 checked)",
        "pteforge pull art_... -o model.pte",
    )
    parser.add_argument("artifact", help="an artifact id")
    parser.add_argument("-o", "--output", type=Path, help="where to write (default: ID.pte)")


def _deploy(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "deploy",
        "make an artifact the next version of a model name (the first creates the model)",
        "pteforge deploy art_... classifier",
    )
    parser.add_argument("artifact", help="an artifact id")
    parser.add_argument("name", help="the model name: [A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def _chat(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "chat",
        "chat with a language model (a model version with a tokenizer), answers streamed",
        "pteforge chat tiny-llama --temperature 0",
    )
    parser.add_argument("name", help="a model name (its latest version), or NAME:VERSION")
    parser.add_argument("--system", help="a system message that opens the chat")
    parser.add_argument("--max-tokens", type=int, help="at most this many tokens per answer")
    parser.add_argument("--temperature", type=float, default=1.0, help="0 is greedy")
    parser.add_argument("--seed", type=int, help="repeat the same sampling")


def _run(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "run",
        "run a method of an artifact or model on the server, with inputs from .npy files",
        "pteforge run classifier.forward --input x.npy --save outputs/",
    )
    parser.add_argument(
        "model",
        metavar="MODEL.METHOD",
        help="an artifact id or a model name (its latest version), a dot, a method: "
        "art_123.forward, classifier.forward",
    )
    parser.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="[NAME=]FILE.npy",
        help="an input tensor; repeat in order, or name each",
    )
    parser.add_argument("--save", type=Path, metavar="DIR", help="write each output as NAME.npy")


def _profile(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "profile",
        "profile a method of an artifact on the server: latency, load times, memory, operators",
        "pteforge profile art_... forward --iterations 50",
    )
    parser.add_argument("artifact", help="an artifact id")
    parser.add_argument("method", help="the method to profile")
    parser.add_argument(
        "--iterations", "-n", type=int, default=20, help="timed runs after a warm-up (1-1000)"
    )
    parser.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="[NAME=]FILE.npy",
        help="an input tensor; repeat in order, or name each (default: the numerics check's)",
    )


def _ls(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "ls",
        "list the project's programs, artifacts or jobs, newest first",
        "pteforge ls jobs --status failed",
    )
    parser.add_argument("what", choices=["programs", "artifacts", "jobs"], help="what to list")
    parser.add_argument("--limit", type=int, default=20, help="at most this many (default: 20)")
    parser.add_argument("--status", help="jobs only: queued, running, succeeded, failed, ...")


def _show(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "show",
        "show a program, artifact or job by its id (--json: the API's object)",
        "pteforge show art_...",
    )
    parser.add_argument("id", metavar="ID", help="an id: prog_..., art_... or job_...")


def _rm(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "rm",
        "delete a program (its artifacts stay) or an artifact",
        "pteforge rm prog_...",
    )
    parser.add_argument("id", metavar="ID", help="an id: prog_... or art_...")


def _cancel(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = _command(
        subparsers,
        common,
        "cancel",
        "cancel a queued or running compile job",
        "pteforge cancel job_...",
    )
    parser.add_argument("job", help="a job id")
