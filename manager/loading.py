"""Reading ``torch.export.save`` archives from disk for the local command line."""

from __future__ import annotations

import zipfile
from pathlib import Path

import torch
from torch.export import ExportedProgram

from pteforge.contracts.saved_files import SAVE_CALL, other_format
from pteforge.manager.errors import ProgramInputError


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
        return torch.export.load(file)
    except Exception as exc:  # any failure to read the archive is a bad input file
        raise ProgramInputError(
            f"{where}{file}: cannot load as a torch.export program: {type(exc).__name__}: {exc}",
            source=str(file),
        ) from exc
