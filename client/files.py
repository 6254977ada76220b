"""Local files around the calls: programs saved for upload, input arrays read from ``.npy``
files, and downloads written to a temporary name first (renamed into place only once the
sha256 matched)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

ProgramSource = Any  # torch.export.ExportedProgram | str | os.PathLike[str]


def program_files(
    programs: Mapping[str, ProgramSource] | ProgramSource, scratch: Path
) -> dict[str, Path]:
    """Each method's ``.pt2`` file: a path as given, an ``ExportedProgram`` saved with
    ``torch.export.save`` under ``scratch`` (torch is imported only then). A lone program
    (not a mapping) is the method ``forward``, as upstream's ``to_edge`` names it."""
    if not isinstance(programs, Mapping):
        programs = {"forward": programs}
    if not programs:
        raise ValueError("upload_program needs at least one method")
    files: dict[str, Path] = {}
    for method, source in programs.items():
        if isinstance(source, str | os.PathLike):
            path = Path(source)
            if not path.is_file():
                raise FileNotFoundError(f"method {method!r}: no file {path}")
            files[method] = path
        else:
            files[method] = _save_exported(method, source, scratch)
    return files


def _save_exported(method: str, program: Any, scratch: Path) -> Path:
    import torch

    if not isinstance(program, torch.export.ExportedProgram):
        raise TypeError(
            f"method {method!r}: expected a torch.export.ExportedProgram or a .pt2 path, "
            f"got {type(program).__name__}"
        )
    path = scratch / f"{method}.pt2"
    torch.export.save(program, path)
    return path


@contextmanager
def partial_file(path: Path) -> Iterator[BinaryIO]:
    """A file next to ``path`` that becomes ``path`` when the block succeeds and is removed
    when it fails (an unwritable directory fails here, before anything is sent)."""
    path = Path(path)
    part = _part(path)
    file = part.open("wb")
    try:
        yield file
        file.close()
        os.replace(part, path)
    except BaseException:
        file.close()
        part.unlink(missing_ok=True)
        raise


def _part(path: Path) -> Path:
    return path.with_name(f".{path.name}.part")


def check_writable(path: Path) -> None:
    """Raise the OSError a download to ``path`` would meet, now (nothing is left behind)."""
    if Path(path).is_dir():
        raise IsADirectoryError(21, "is a directory", str(path))
    part = _part(Path(path))
    part.open("wb").close()
    part.unlink()


def read_arrays(specs: list[str]) -> list[Any] | dict[str, Any]:
    """``FILE.npy`` arguments as arrays in order, or ``NAME=FILE.npy`` ones by name; a
    ``ValueError`` says which file is not a readable ``.npy`` array (never unpickled)."""
    import numpy as np

    named = [spec.partition("=") for spec in specs]
    if any(sep for _, sep, _ in named) and not all(sep for _, sep, _ in named):
        raise ValueError("name every input (NAME=FILE.npy) or none")
    arrays = []
    for spec in specs:
        file = spec.partition("=")[2] or spec
        try:
            with open(file, "rb") as npy:  # numpy's own advice, to allow pickles, misleads
                if npy.read(6) != b"\x93NUMPY":
                    raise ValueError("not a .npy file (numpy.save writes one)")
            arrays.append(np.load(file, allow_pickle=False))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{file}: not a readable .npy array: {exc}") from exc
    if named and named[0][1]:
        return {name: array for (name, _, _), array in zip(named, arrays, strict=True)}
    return arrays


def check_tokenizer_files(tokenizer: Path | None, config: Path | None, chat: Path | None) -> None:
    """Refuse (``ValueError``) what ``deploy --tokenizer`` could not send, before it adds a
    version: a config or chat template without the tokenizer, or a file that is not there."""
    for flag, given in (("--tokenizer-config", config), ("--chat-template", chat)):
        if given is not None and tokenizer is None:
            raise ValueError(f"{flag} needs --tokenizer")
    for local in (tokenizer, config, chat):
        if local is not None and not local.is_file():
            raise ValueError(f"{local}: no such file")
