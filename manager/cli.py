"""``pteforge compile``: lower local ``.pt2`` programs to a ``.pte`` without a server.

After writing the ``.pte`` it runs the numerics check (:mod:`pteforge.manager.verify`) and
reports it under ``numerics``; a flagged method is a warning on stderr, not an error exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from pteforge.contracts import InvalidMethodNameError, check_method_name
from pteforge.manager.errors import ManagerError, ProgramInputError

EXIT_BAD_INPUT = 2
_STAGES = ("quantize", "to_edge", "partition", "preprocess", "emit", "verify")
# Third-party loggers that warn about optional native libraries and untested versions
# while ExecuTorch and its backends load; none of it is about the user's input.
_THIRD_PARTY_NOISE = ("torchao", "torch.utils._pytree", "coremltools")


def register(subparsers: Any) -> None:
    """Add the ``compile`` subcommand to the top-level ``pteforge`` parser."""
    parser = subparsers.add_parser(
        "compile",
        help="compile local torch.export programs to a .pte",
        description="Lower torch.export programs (one per method) to one ExecuTorch .pte.",
    )
    parser.add_argument(
        "--method",
        action="append",
        required=True,
        metavar="NAME=FILE.pt2",
        help="a method name and its torch.export.save archive; repeat per method",
    )
    parser.add_argument("--plan", type=Path, help="lowering plan JSON (default: portable)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the .pte to write")
    parser.set_defaults(handler=run)


class _Progress:
    """Prints each stage with the time the previous one took, on stderr."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._current: str | None = None
        self._since = time.perf_counter()

    def __call__(self, stage: str) -> None:
        self._finish()
        step = _STAGES.index(stage) + 1 if stage in _STAGES else 0
        print(f"[{step}/{len(_STAGES)}] {stage} ...", file=self._stream, flush=True)
        self._current = stage

    def _finish(self) -> None:
        now = time.perf_counter()
        if self._current is not None:
            print(f"      {self._current} done in {now - self._since:.2f}s", file=self._stream)
        self._current, self._since = None, now

    def done(self) -> None:
        self._finish()


def _method_files(specs: list[str]) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            raise ProgramInputError(f"--method {spec!r}: expected NAME=FILE.pt2")
        if name in files:
            raise ProgramInputError(f"--method {name!r} given twice")
        try:
            check_method_name(name)
        except InvalidMethodNameError as exc:
            raise ProgramInputError(f"--method {spec!r}: {exc}") from None
        files[name] = Path(file)
    return files


def _read_plan(path: Path | None) -> Any:
    if path is None:
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProgramInputError(f"--plan {path}: cannot read a JSON plan: {exc}") from exc


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
    for name, file in files.items():
        check_archive(file, name)
    with _quiet_third_party():
        return _compile_files(files, plan, args.output)


def _compile_files(files: dict[str, Path], plan: Any, output: Path) -> dict[str, Any]:
    from pteforge.backends import default_catalog
    from pteforge.manager.compiler import compile_programs
    from pteforge.manager.loading import load_program_file
    from pteforge.manager.verify import verify_numerics

    programs = {name: load_program_file(file, name) for name, file in files.items()}
    progress = _Progress(sys.stderr)
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
    """One line on stderr per method the numerics check flagged or could not run."""
    for method, record in numerics["methods"].items():
        if record["status"] == "over_tolerance":
            check = record["check"]
            worst = [o for o in record["outputs"] if not o["within_tolerance"]]
            values = ", ".join(f"{o['name']} {check['metric']}={o[check['metric']]}" for o in worst)
            limit = f"limit {check['limit']}"
            print(f"warning: method {method!r} is over tolerance ({limit}): {values}", file=stream)
        elif record["status"] in ("error", "not_executable"):
            print(f"warning: method {method!r} not verified: {record['message']}", file=stream)


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
