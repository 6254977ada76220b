"""``pteforge compile``: lower local ``.pt2`` programs to a ``.pte`` without a server.

After writing the ``.pte`` it runs the numerics check (:mod:`pteforge.manager.verify`) and
reports it under ``numerics``; a flagged method is a warning on stderr, not an error exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from pteforge.cli import add_command
from pteforge.contracts.names import parse_method_files
from pteforge.manager.errors import ManagerError, ProgramInputError

EXIT_BAD_INPUT = 2
# Third-party loggers that warn about optional native libraries and untested versions
# while ExecuTorch and its backends load; none of it is about the user's input.
_THIRD_PARTY_NOISE = ("torchao", "torch.utils._pytree", "coremltools")


def register(subparsers: Any) -> None:
    """Add the ``compile`` subcommand to the top-level ``pteforge`` parser."""
    parser = add_command(
        subparsers,
        "compile",
        "compile local torch.export programs to a .pte",
        "Lower torch.export programs (one per method) to one ExecuTorch .pte on this machine, "
        "without a server, and check its numerics against the exported program.",
        "pteforge compile --method forward=model.pt2 --plan "
        '\'{"all": {"partitioners": ["xnnpack"]}}\' -o model.pte',
        run,
    )
    parser.add_argument(
        "--method",
        action="append",
        required=True,
        metavar="NAME=FILE.pt2",
        help="a method name and its torch.export.save archive; repeat per method",
    )
    parser.add_argument(
        "--plan", help="lowering plan: a JSON file or inline JSON (default: portable)"
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="the .pte to write")


class _Progress:
    """Prints each stage with the time the previous one took, on stderr, numbered among the
    stages this plan runs (so it starts at 1 and never skips one)."""

    def __init__(self, stream: TextIO, stages: list[str]) -> None:
        self._stream = stream
        self._stages = stages
        self._current: str | None = None
        self._since = time.perf_counter()

    def __call__(self, stage: str) -> None:
        self._finish()
        if stage not in self._stages:  # a stage the plan did not predict: number it anyway
            self._stages.insert(len(self._stages) - 1, stage)
        step = self._stages.index(stage) + 1
        print(f"[{step}/{len(self._stages)}] {stage} ...", file=self._stream, flush=True)
        self._current = stage

    def _finish(self) -> None:
        now = time.perf_counter()
        if self._current is not None:
            print(f"      {self._current} done in {now - self._since:.2f}s", file=self._stream)
        self._current, self._since = None, now

    def done(self) -> None:
        self._finish()


def _method_files(specs: list[str]) -> dict[str, Path]:
    try:
        return parse_method_files(specs)
    except ValueError as exc:
        raise ProgramInputError(f"--method {exc}") from None


def _read_plan(value: str | None) -> Any:
    """``--plan`` (:func:`read_plan_option`), or None."""
    from pteforge.contracts.plan_problems import read_plan_option

    try:
        return None if value is None else read_plan_option(value)
    except ValueError as exc:
        raise ProgramInputError(str(exc)) from None


def _planned_stages(plan: Any, methods: list[str]) -> list[str]:
    """The stages ``compile_programs`` reports for ``plan``, then verify (also checks the
    plan before anything is loaded)."""
    from pteforge.manager.plan import parse_plan, resolve_targets

    targets = resolve_targets(parse_plan(plan), sorted(methods)).values()
    quantize = ["quantize"] if any(t.quantize for t in targets) else []
    delegate = ["partition", "preprocess"] if any(t.delegated for t in targets) else []
    return [*quantize, "to_edge", *delegate, "emit", "verify"]


def _check_writable(output: Path) -> None:
    """Refuse an ``-o`` that cannot be written before spending time compiling."""
    directory = output.parent
    if output.is_dir():
        raise ProgramInputError(f"-o {output}: is a directory")
    if not directory.is_dir():
        raise ProgramInputError(f"-o {output}: no directory {directory}")
    writable = os.access(output if output.exists() else directory, os.W_OK)
    if not writable:
        raise ProgramInputError(f"-o {output}: permission denied")


@contextmanager
def _quiet_third_party() -> Iterator[None]:
    """Keep library-internal warnings (not about the user's input) off the terminal."""
    loggers = [logging.getLogger(name) for name in _THIRD_PARTY_NOISE]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _compile(args: argparse.Namespace) -> dict[str, Any]:
    from pteforge.manager.loading import check_archive

    files = _method_files(args.method)
    plan = _read_plan(args.plan)
    _check_writable(args.output)
    for name, file in files.items():
        check_archive(file, name)
    with _quiet_third_party():
        stages = _planned_stages(plan, list(files))
        return _compile_files(files, plan, args.output, stages)


def _compile_files(
    files: dict[str, Path], plan: Any, output: Path, stages: list[str]
) -> dict[str, Any]:
    from pteforge.backends import default_catalog
    from pteforge.manager.compiler import compile_programs
    from pteforge.manager.loading import load_program_file
    from pteforge.manager.verify import verify_numerics

    programs = {name: load_program_file(file, name) for name, file in files.items()}
    progress = _Progress(sys.stderr, stages)
    compiled = compile_programs(programs, plan, default_catalog(), on_stage=progress)
    try:
        compiled.write(output)
    except OSError as exc:
        raise ProgramInputError(f"-o {output}: cannot write: {exc}") from exc
    progress("verify")
    numerics = verify_numerics(programs, compiled)
    progress.done()
    _warn_numerics(numerics, sys.stderr)
    return {
        "output": str(output),
        "size_bytes": len(compiled.pte),
        "methods": {m: s.to_json() for m, s in compiled.methods.items()},
        "report": compiled.report,
        "numerics": numerics,
    }


def _warn_numerics(numerics: dict[str, Any], stream: TextIO) -> None:
    """One line on stderr per method the numerics check flagged, could not run, or passed
    with a message (as the client warns)."""
    for method, record in numerics["methods"].items():
        if record["status"] == "over_tolerance":
            check = record["check"]
            worst = [o for o in record["outputs"] if not o["within_tolerance"]]
            values = ", ".join(f"{o['name']} {check['metric']}={o[check['metric']]}" for o in worst)
            limit = f"limit {check['limit']}"
            print(f"warning: method {method!r} is over tolerance ({limit}): {values}", file=stream)
        elif record["status"] in ("error", "not_executable"):
            print(f"warning: method {method!r} not verified: {record['message']}", file=stream)
        elif record.get("message"):  # passed, but compared nothing or fixed a dimension
            print(f"warning: method {method!r} passed, but {record['message']}", file=stream)


def run(args: argparse.Namespace) -> int:
    """Handler of ``pteforge compile``; bad input is one line on stderr and exit code 2."""
    try:
        summary = _compile(args)
    except ManagerError as exc:
        message = " ".join(str(exc).split())
        print(f"pteforge compile: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(json.dumps(summary, indent=2))
    return 0
