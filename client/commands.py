"""What the remote commands do (parsed by ``pteforge.client.cli``)."""

from __future__ import annotations

import argparse
import getpass
import hashlib
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pteforge.client.browse import cancel, connect, ls, rm, show
from pteforge.client.chat_command import chat
from pteforge.client.cli import EXIT_BAD_INPUT, EXIT_ERROR, BadInputError
from pteforge.client.config import ENV_TOKEN, InvalidURLError, save_credentials
from pteforge.client.errors import NotFoundError, NumericsWarning, PteforgeError, UnauthorizedError
from pteforge.client.files import check_tokenizer_files, check_writable, read_arrays
from pteforge.client.models import Artifact, Program
from pteforge.client.render import Output
from pteforge.client.sync import Client
from pteforge.client.views import (
    NOT_A_LANGUAGE_MODEL,
    artifact_summary,
    infer_answer,
    output_rows,
    program_summary,
    stage_plan,
)
from pteforge.contracts.names import parse_method_files
from pteforge.contracts.plan_problems import read_plan_option

TOKEN_HINT = (
    "the server checks tokens against its own database: create one on the server host with "
    "the same PTEFORGE_HOME (or PTEFORGE_DATABASE_URL) as `pteforge serve`, which prints "
    "the database it uses when it starts"
)


MAX_LIST = 1000  # the most one list call returns
PROFILE_ROWS = 15  # the operators `pteforge profile` shows, largest first (--json: all)


def run_command(args: argparse.Namespace) -> int:
    """Run one remote command; errors become one line on stderr and a non-zero exit."""
    out = Output(args.json)
    try:
        _COMMANDS[args.command](args, out)
    except (BadInputError, InvalidURLError, OSError) as exc:
        out.error(f"pteforge {args.command}: error: {_one_line(exc)}")
        return EXIT_BAD_INPUT
    except UnauthorizedError as exc:
        out.error(f"pteforge {args.command}: error: {_one_line(exc)}; {TOKEN_HINT}")
        return EXIT_ERROR
    except PteforgeError as exc:
        out.error(f"pteforge {args.command}: error: {_one_line(exc)}")
        return EXIT_ERROR
    return 0


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, FileNotFoundError) and exc.filename:
        text = f"no such file: {exc.filename}"
    elif isinstance(exc, PermissionError) and exc.filename:
        text = f"permission denied: {exc.filename}"
    return text or type(exc).__name__


def login(args: argparse.Namespace, out: Output) -> None:
    token = args.token or os.environ.get(ENV_TOKEN) or _ask_token()
    with Client(args.url, token) as client:
        client.list_programs(limit=1)  # proves the URL and the token before saving them
    path = save_credentials(client.url, token)
    if out.as_json:
        out.json({"url": client.url, "config": str(path)})
        return
    out.line(f"Logged in to {client.url}; saved to {path} (mode 0600).")
    out.line("PTEFORGE_URL and PTEFORGE_TOKEN override the saved values.")


def _ask_token() -> str:
    token = getpass.getpass("API token: ") if sys.stdin.isatty() else sys.stdin.readline()
    if not token.strip():
        raise BadInputError(f"no token: pass --token, set {ENV_TOKEN}, or type it")
    return token.strip()


def push(args: argparse.Namespace, out: Output) -> None:
    files = _method_files(args.methods)
    with connect() as client:
        program = client.upload_program(files, name=args.name)
    if out.as_json:
        out.json(program.raw)
        return
    program_summary(out, program)


def _method_files(specs: list[str]) -> dict[str, Path]:
    try:
        files = parse_method_files(specs)
    except ValueError as exc:
        raise BadInputError(str(exc)) from None
    for method, file in files.items():
        if not file.is_file():
            raise BadInputError(f"method {method!r}: no file {file}")
    return files


def read_plan(value: str) -> dict[str, Any]:
    """``--plan``, checked here as the server will check it (:func:`read_plan_option`)."""
    try:
        return read_plan_option(value)
    except ValueError as exc:
        raise BadInputError(str(exc)) from None


def build(args: argparse.Namespace, out: Output) -> None:
    plan = read_plan(args.plan)
    if args.output is not None:
        check_writable(args.output)  # before compiling, not after
    with connect() as client:
        program = _program(client, args.program)
        if args.no_wait:
            job = client.compile(program, plan, wait=False)
            out.json(job.raw) if out.as_json else out.line(str(job))
            return
        with (
            out.stages(stage_plan(plan, [m.name for m in program.methods])) as display,
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", NumericsWarning)  # one line each, below
            artifact = client.compile(program, plan, on_stage=display)
        for problem in artifact.numerics_failures():
            out.error(f"warning: {problem}")
        if args.output is not None:
            _download(client, out, artifact, args.output)
    if out.as_json:
        out.json(artifact.raw)
        return
    artifact_summary(out, artifact)
    if args.output is not None:
        out.line(f"Wrote {args.output} (sha256 checked).")


def _program(client: Client, ref: str) -> Program:
    """The program with id ``ref``, else the newest one named ``ref``."""
    try:
        return client.get_program(ref)
    except NotFoundError:
        named = [p for p in client.list_programs(limit=MAX_LIST) if p.name == ref]
        if not named:
            raise NotFoundError(f"no program with id or name {ref!r}", status=404) from None
        return named[0]


def _download(
    client: Client, out: Output, artifact: Artifact, path: Path, part: str = "pte"
) -> None:
    with out.bytes_progress(path.name) as progress:
        client.download(
            artifact, path, on_progress=progress, bundled=part == "bpte", data=part == "ptd"
        )


def pull(args: argparse.Namespace, out: Output) -> None:
    if args.bundled and args.ptd:
        raise BadInputError("--bundled and --ptd name different files: pass one")
    part = "bpte" if args.bundled else "ptd" if args.ptd else "pte"
    path = args.output or Path(f"{args.artifact}.{part}")
    check_writable(path)
    with connect() as client:
        artifact = client.get_artifact(args.artifact)
        _download(client, out, artifact, path, part)
    sha256, size = artifact.sha256, artifact.size_bytes
    if part != "pte":
        with path.open("rb") as file:
            sha256, size = hashlib.file_digest(file, "sha256").hexdigest(), path.stat().st_size
    if out.as_json:
        out.json({"path": str(path), "sha256": sha256, "size_bytes": size})
        return
    out.line(f"Wrote {path} ({size} bytes, sha256 {sha256} checked).")


def deploy(args: argparse.Namespace, out: Output) -> None:
    try:
        check_tokenizer_files(args.tokenizer, args.tokenizer_config, args.chat_template)
    except ValueError as exc:
        raise BadInputError(str(exc)) from None
    tokenizer, generation = None, None
    with connect() as client:
        created = client.deploy(_artifact_id(client, args.artifact, out, args.ptd), args.name)
        try:
            if args.tokenizer is not None:
                tokenizer = client.set_tokenizer(
                    created.name,
                    created.version,
                    args.tokenizer,
                    args.tokenizer_config,
                    args.chat_template,
                )
        except PteforgeError:  # one step: no version is left without the tokenizer it was given
            client.delete_model_version(created.name, created.version)
            raise
        if tokenizer is not None:
            generation = client.get_artifact(created.artifact_id).raw.get("generation")
    if tokenizer is not None and not generation:
        out.error(f"warning: {NOT_A_LANGUAGE_MODEL}")
    if out.as_json:
        out.json(created.raw if tokenizer is None else {**created.raw, "tokenizer": tokenizer})
        return
    out.line(f"{created.name} version {created.version}: {created.artifact_id}")
    if generation:
        out.line(f"tokenizer attached: {created.name}:{created.version} answers text generation")


def _artifact_id(client: Client, given: str, out: Output, ptd: Path | None = None) -> str:
    """``given``: an artifact id, or a ``.pte`` file built elsewhere, uploaded first (with
    ``ptd``, the ``.ptd`` holding its constants)."""
    path = Path(given)
    if not (path.suffix == ".pte" or path.is_file()):
        if ptd is not None:
            raise BadInputError("--ptd goes with a .pte file, uploaded with it, not an id")
        return given
    artifact = client.upload_artifact(path, ptd)
    if not out.as_json:
        out.line(f"Uploaded {path} as {artifact.id}.")
    return artifact.id


def profile(args: argparse.Namespace, out: Output) -> None:
    inputs = _read_inputs(args.input) if args.input else None
    with connect() as client:
        report = client.profile(args.artifact, args.method, args.iterations, inputs)
    if out.as_json:
        out.json(report.model_dump(mode="json"))
        return
    latency, load = report.latency_us, report.load_ms
    out.line(
        f"{report.artifact_id}.{report.method}: {report.iterations} runs, p50 "
        f"{latency.p50:.1f} us (min {latency.min:.1f}, p90 {latency.p90:.1f}, max "
        f"{latency.max:.1f}); load {load.cold:.2f} ms cold, {load.warm:.2f} ms warm; "
        f"peak memory {report.peak_memory_bytes / 2**20:.2f} MiB"
    )
    rows = [
        (row.name, row.backend, row.calls, f"{row.total_us:.1f}", f"{row.share:.1%}")
        for row in report.operators[:PROFILE_ROWS]
    ]
    out.table(None, ["operator", "backend", "calls", "total us", "share"], rows)


def run(args: argparse.Namespace, out: Output) -> None:
    target, dot, method = args.model.rpartition(".")
    name, colon, version = target.partition(":")
    if not dot or not name or not method or (colon and not version.isdigit()):
        raise BadInputError(
            f"{args.model!r}: expected MODEL.METHOD (an artifact id or a model name, or "
            "NAME:VERSION for a model's version)"
        )
    inputs = _read_inputs(args.input)
    with connect() as client:
        result = client.infer(name, method, inputs, version=int(version) if colon else None)
    if args.save is not None:
        import numpy as np

        args.save.mkdir(parents=True, exist_ok=True)
        for name, array in result.outputs.items():
            np.save(args.save / f"{name}.npy", array)
    if out.as_json:
        out.json(infer_answer(result))
        return
    output_rows(out, result)


def _read_inputs(specs: list[str]) -> list[Any] | dict[str, Any]:
    try:
        return read_arrays(specs)
    except ValueError as exc:
        raise BadInputError(f"--input: {exc}") from exc


_COMMANDS: Mapping[str, Callable[[argparse.Namespace, Output], None]] = {
    "login": login,
    "push": push,
    "build": build,
    "pull": pull,
    "deploy": deploy,
    "run": run,
    "chat": chat,
    "profile": profile,
    "ls": ls,
    "show": show,
    "rm": rm,
    "cancel": cancel,
}
