"""The remote commands of ``pteforge``: ``login``, ``push``, ``build``, ``pull``, ``deploy``,
``run``, ``profile``, ``ls``, ``show``, ``rm`` and ``cancel``, each talking to a server through
:class:`pteforge.client.Client`.

Every command takes ``--json`` (machine-readable output on stdout); progress goes to stderr;
an error is one line on stderr with exit code 1 (2 for bad local input). This module only
builds the parser: the work (and the imports of httpx, numpy and rich) is in ``commands``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pteforge.cli import add_command

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


Argument = tuple[tuple[str, ...], dict[str, Any]]


def _arg(*flags: str, **options: Any) -> Argument:
    """One ``add_argument`` call, written as its flags and options."""
    return flags, options


def _count(low: int, high: int | None = None) -> Any:
    """An argparse type: an integer from ``low`` (to ``high``), checked here rather than
    sent for the server to refuse."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low or (high is not None and value > high):
            span = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{value} is not {span}")
        return value

    parse.__name__ = "integer"  # argparse names the type: "invalid integer value: 'x'"
    return parse


def _inputs(help: str) -> Argument:
    return _arg("--input", "-i", action="append", default=[], metavar="[NAME=]FILE.npy", help=help)


@dataclass(frozen=True)
class Command:
    """A remote command: ``help`` in the list of commands; its description adds ``example``
    and ``footer`` (where the server and token come from)."""

    name: str
    help: str
    example: str
    arguments: tuple[Argument, ...]
    footer: str = REMOTE_FOOTER

    def add_to(self, subparsers: Any, common: argparse.ArgumentParser) -> None:
        """Add this command's parser (with the ``common`` options) to ``subparsers``."""
        description = f"{self.help[0].upper()}{self.help[1:]}."
        parser = add_command(
            subparsers,
            self.name,
            self.help,
            description,
            self.example,
            _dispatch,
            self.footer,
            parents=[common],
        )
        for flags, options in self.arguments:
            parser.add_argument(*flags, **options)


ARTIFACT = _arg("artifact", help="an artifact id")

COMMANDS: tuple[Command, ...] = (
    Command(
        "login",
        "check a server URL and token, then save them for the other commands (mode 0600)",
        "pteforge login 127.0.0.1:8000 --token ptf_...",
        (
            _arg(
                "url",
                help="the server: http[s]://HOST[:PORT], or HOST:PORT for http (127.0.0.1:8000)",
            ),
            _arg(
                "--token", help="an API token (default: $PTEFORGE_TOKEN, else asked for on stdin)"
            ),
        ),
        LOGIN_FOOTER,
    ),
    Command(
        "push",
        "upload a program: one torch.export .pt2 archive per method",
        "pteforge push mymodel forward=model.pt2",
        (
            _arg("name", help="the program's name"),
            _arg(
                "methods",
                nargs="+",
                metavar="METHOD=FILE.pt2",
                help="a method and its archive; program=FILE.pt2 alone: a multi-method archive "
                "(package_pt2)",
            ),
        ),
    ),
    Command(
        "build",
        "compile an uploaded program to a .pte on the server, showing its stages live",
        'pteforge build mymodel --plan \'{"all": {"partitioners": ["xnnpack"]}}\' -o model.pte',
        (
            _arg("program", help="a program id, or the name of the newest such program"),
            _arg(
                "--plan", default="{}", help="a plan file or inline JSON (default: {} = portable)"
            ),
            _arg("-o", "--output", type=Path, help="also download the .pte here"),
            _arg("--no-wait", action="store_true", help="queue the job and return"),
        ),
    ),
    Command(
        "pull",
        "download an artifact's .pte (its sha256 checked)",
        "pteforge pull art_... -o model.pte\n  pteforge pull art_... --ptd -o model.ptd",
        (
            ARTIFACT,
            _arg("-o", "--output", type=Path, help="where to write (default: ID.pte or ID.bpte)"),
            _arg(
                "--bundled",
                action="store_true",
                help="the ExecuTorch BundledProgram (.bpte) instead: the .pte with the numerics "
                "check's inputs and expected outputs, for verifying on a device",
            ),
            _arg(
                "--ptd",
                action="store_true",
                help="the .ptd instead: the constants a .pte exported with program-data "
                "separation keeps outside (default: ID.ptd)",
            ),
        ),
    ),
    Command(
        "deploy",
        "make an artifact the next version of a model name (the first creates the model)",
        "pteforge deploy art_... classifier\n"
        "  pteforge deploy model.pte tiny-llama --tokenizer tokenizer.json\n"
        "  pteforge deploy model.pte adapter --ptd model.ptd",
        (
            _arg(
                "artifact",
                help="an artifact id, or a .pte file built elsewhere (optimum-executorch's, "
                "say), uploaded first",
            ),
            _arg("name", help="the model name: [A-Za-z0-9][A-Za-z0-9_-]{0,63}"),
            _arg(
                "--ptd",
                type=Path,
                metavar="FILE",
                help="the .ptd holding the .pte's constants (ExecuTorch's program-data "
                "separation, external_constants), uploaded with it",
            ),
            _arg(
                "--tokenizer",
                type=Path,
                metavar="FILE",
                help="a language model's tokenizer.json, attached to the new version",
            ),
            _arg(
                "--tokenizer-config",
                type=Path,
                metavar="FILE",
                help="its tokenizer_config.json (its chat_template renders chats)",
            ),
            _arg(
                "--chat-template",
                type=Path,
                metavar="FILE",
                help="the chat_template.jinja transformers saves beside a config without one",
            ),
        ),
    ),
    Command(
        "run",
        "run a method of an artifact or model on the server, with inputs from .npy files",
        "pteforge run classifier.forward --input x.npy --save outputs/",
        (
            _arg(
                "model",
                metavar="MODEL.METHOD",
                help="an artifact id or a model name (its latest version, or NAME:VERSION), a "
                "dot, a method: art_123.forward, classifier.forward, classifier:2.forward",
            ),
            _inputs("an input tensor; repeat in order, or name each"),
            _arg("--save", type=Path, metavar="DIR", help="write each output as NAME.npy"),
        ),
    ),
    Command(
        "profile",
        "profile a method of an artifact on the server: latency, load times, memory, operators",
        "pteforge profile art_... forward --iterations 50",
        (
            ARTIFACT,
            _arg("method", help="the method to profile"),
            _arg(
                "--iterations",
                "-n",
                type=_count(1, 1000),
                default=20,
                help="timed runs after a warm-up (1-1000)",
            ),
            _inputs(
                "an input tensor; repeat in order, or name each (default: the numerics check's)"
            ),
        ),
    ),
    Command(
        "ls",
        "list the project's programs, artifacts or jobs, newest first, or its models by name",
        "pteforge ls jobs --status failed",
        (
            _arg("what", choices=["programs", "artifacts", "jobs", "models"], help="what to list"),
            _arg(
                "--limit", type=_count(1, 1000), default=20, help="at most this many (default: 20)"
            ),
            _arg("--status", help="jobs only: queued, running, succeeded, failed, ..."),
        ),
    ),
    Command(
        "show",
        "show a program, artifact or job by its id, or a model by name (--json: the API's object)",
        "pteforge show art_...",
        (_arg("id", metavar="ID", help="prog_..., art_..., job_..., a model or NAME:VERSION"),),
    ),
    Command(
        "rm",
        "delete a program (its artifacts stay), an artifact, or a model's version",
        "pteforge rm prog_...",
        (_arg("id", metavar="ID", help="an id: prog_... or art_..., or NAME:VERSION"),),
    ),
    Command(
        "cancel",
        "cancel a queued or running compile job",
        "pteforge cancel job_...",
        (_arg("job", help="a job id"),),
    ),
    Command(
        "chat",
        "chat with a language model (a model version with a tokenizer), answers streamed",
        "pteforge chat tiny-llama --temperature 0",
        (
            _arg("name", help="a model name (its latest version), or NAME:VERSION"),
            _arg("--system", help="a system message that opens the chat"),
            _arg("--max-tokens", type=_count(1), help="at most this many tokens per answer"),
            _arg("--temperature", type=float, default=1.0, help="0 is greedy"),
            _arg("--seed", type=int, help="repeat the same sampling"),
        ),
    ),
)


def register(subparsers: Any) -> None:
    """Add the remote commands to the top-level ``pteforge`` parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON on stdout (for scripts)")
    for command in COMMANDS:
        command.add_to(subparsers, common)


def _dispatch(args: argparse.Namespace) -> int:
    from pteforge.client.commands import run_command

    return run_command(args)
