"""Reading ``torch.export.save`` archives from disk for the local command line."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import IO, Any

import sympy
import torch
from torch.export import ExportedProgram

from pteforge.contracts.saved_files import SAVE_CALL, other_format
from pteforge.manager.errors import ProgramInputError
from pteforge.manager.treespecs import readable_program

_MODELS = "models/"


def _where(method: str | None) -> str:
    return f"method {method!r}: " if method else ""


def check_archive(path: str | Path, method: str | None = None) -> Path:
    """Raise ``ProgramInputError`` unless ``path`` is an existing zip archive."""
    file = Path(path)
    if not file.is_file():
        raise ProgramInputError(f"{_where(method)}{file}: no such file", source=str(file))
    if not zipfile.is_zipfile(file):
        with open(file, "rb") as head:
            pte = head.read(8)[4:8] == b"ET12"  # an ExecuTorch program's identifier
        what = "an ExecuTorch .pte, already compiled" if pte else "not a zip file"
        raise ProgramInputError(
            f"{_where(method)}{file}: not a torch.export archive ({what})", source=str(file)
        )
    with zipfile.ZipFile(file) as archive:
        other = other_format(archive.namelist(), older_export=False)
    if other:  # torch.export.load would log a traceback and then fail without saying why
        raise ProgramInputError(
            f"{_where(method)}{file}: {other}: save it with {SAVE_CALL}", source=str(file)
        )
    return file


def load_program_file(path: str | Path, method: str | None = None) -> ExportedProgram:
    """Load one ``.pt2`` archive, after checking it is a zip archive at all.

    The local CLI trusts its user's own files: ``torch.export.load`` runs the archive's
    deserialisation in this process. The server never calls this on uploads; it loads
    untrusted programs in its sandbox.
    """
    file = check_archive(path, method)
    where = _where(method)
    try:
        if not _is_pt2(file):  # the older torch.export.save layout, which torch still reads
            return with_symbol_hints(torch.export.load(file))
        programs = read_programs(file)
        return programs["model"] if "model" in programs else _only(programs)
    except ProgramInputError as exc:
        raise ProgramInputError(f"{where}{file}: {exc}", source=str(file)) from None
    except Exception as exc:  # any failure to read the archive is a bad input file
        raise ProgramInputError(
            f"{where}{file}: cannot load as a torch.export program: {type(exc).__name__}: {exc}",
            source=str(file),
        ) from exc


def read_programs(file: str | Path | IO[bytes]) -> dict[str, ExportedProgram]:
    """Every program of a pt2 archive (``models/NAME.json`` -> ``NAME``), as ``torch.export.load``
    reads them, except that a pytree type torch does not know (a ``transformers``
    ``ModelOutput``) is read as a plain container (:mod:`pteforge.manager.treespecs`): the
    one reading of archives for the local CLI and the service's sandbox and lowering
    children. Raises ``ProgramInputError`` for a type that cannot be read so."""
    from torch.export.pt2_archive._package import (
        ARCHIVE_VERSION_PATH,
        ARCHIVE_VERSION_VALUE,
        PT2ArchiveReader,
        _load_exported_programs,
    )

    class _Reader(PT2ArchiveReader):
        def read_bytes(self, name: str) -> bytes:
            data = super().read_bytes(name)
            return readable_program(data) if name.startswith(_MODELS) else data

    reader = _Reader(str(file) if isinstance(file, Path) else file)
    version = reader.read_string(ARCHIVE_VERSION_PATH)
    if version != ARCHIVE_VERSION_VALUE:
        raise ValueError(f"archive version {version[:20]!r}, not {ARCHIVE_VERSION_VALUE!r}")
    programs = _load_exported_programs(reader, reader.get_file_names(), None)
    return {name: with_symbol_hints(program) for name, program in programs.items()}


def with_symbol_hints(program: ExportedProgram) -> ExportedProgram:
    """``program`` with its shape env as ``torch.export`` left it, where torch 2.13's reader
    did not.

    Reading a program with a derived dimension (``384 * n - 256`` audio samples: Moonshine's
    encoder) keys the example's sizes and the ranges by expression (``384*s69 - 256: 3200``),
    not by symbol: a guard on another expression of ``s69`` found no value ("data-dependent")
    and lowering failed where the program as exported lowers, and torch's own passes stop at
    a key that is not a symbol. Each symbol gets the value an expression of it alone was
    recorded with; the expression keys go. A program without such keys is left as it is.
    """
    env = _shape_env(program)
    if env is None:
        return program
    values, ranges = env.backed_var_to_val, env.var_to_range
    for expr, value in [(e, v) for e, v in values.items() if not isinstance(e, sympy.Symbol)]:
        del values[expr]
        solved = _solved(expr, value)
        if solved is not None and solved[0] not in values:
            values[solved[0]] = sympy.Integer(solved[1])
    for expr in [e for e in ranges if not isinstance(e, sympy.Symbol)]:
        del ranges[expr]
    return program


def _shape_env(program: ExportedProgram) -> Any:
    """The shape env of ``program``'s symbolic sizes (None: it has none)."""
    for node in program.graph.nodes:
        for size in getattr(node.meta.get("val"), "shape", ()):
            if isinstance(size, torch.SymInt):
                return size.node.shape_env
    return None


def _solved(expr: Any, value: Any) -> tuple[sympy.Symbol, int] | None:
    """The one symbol of ``expr`` and its integer value where ``expr`` equals ``value``."""
    if len(expr.free_symbols) != 1:
        return None
    (symbol,) = expr.free_symbols
    try:
        roots = sympy.solve(sympy.Eq(expr, value), symbol)
    except (NotImplementedError, TypeError, ValueError):  # Max(1, s - 2) and such
        return None
    integers = [int(root) for root in roots if getattr(root, "is_integer", False)]
    return (symbol, integers[0]) if len(integers) == 1 else None


def _is_pt2(file: Path) -> bool:
    """Whether ``file`` is a pt2 archive (an ``archive_format`` entry, under its root folder)."""
    with zipfile.ZipFile(file) as archive:
        return any(name.split("/", 1)[-1] == "archive_format" for name in archive.namelist())


def _only(programs: dict[str, ExportedProgram]) -> ExportedProgram:
    if len(programs) != 1:
        raise ValueError(f"the archive holds {len(programs)} programs and none named 'model'")
    return next(iter(programs.values()))
