"""``pteforge compile``: lower local ``.pt2`` programs to a ``.pte`` without a server."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from pteforge.backends import BackendCatalogError, default_catalog
from pteforge.manager.compiler import compile_programs
from pteforge.manager.errors import ManagerError, ProgramInputError
from pteforge.manager.loading import load_program_file

EXIT_BAD_INPUT = 2
_STAGES = ("quantize", "to_edge", "partition", "preprocess", "emit")


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
        files[name] = Path(file)
    return files


def _read_plan(path: Path | None) -> Any:
    if path is None:
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProgramInputError(f"--plan {path}: cannot read a JSON plan: {exc}") from exc


def _compile(args: argparse.Namespace) -> dict[str, Any]:
    files = _method_files(args.method)
    plan = _read_plan(args.plan)
    programs = {name: load_program_file(file, name) for name, file in files.items()}
    progress = _Progress(sys.stderr)
    compiled = compile_programs(programs, plan, default_catalog(), on_stage=progress)
    progress.done()
    try:
        compiled.write(args.output)
    except OSError as exc:
        raise ProgramInputError(f"-o {args.output}: cannot write: {exc}") from exc
    return {
        "output": str(args.output),
        "size_bytes": len(compiled.pte),
        "methods": {m: s.to_json() for m, s in compiled.methods.items()},
        "report": compiled.report,
    }


def run(args: argparse.Namespace) -> int:
    """Handler of ``pteforge compile``; bad input is one line on stderr and exit code 2."""
    try:
        summary = _compile(args)
    except (ManagerError, BackendCatalogError) as exc:
        message = " ".join(str(exc).split())
        print(f"pteforge compile: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(json.dumps(summary, indent=2))
    return 0
