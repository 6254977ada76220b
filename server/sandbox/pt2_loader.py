"""Loading validated pt2 archives with torch; call only inside a disposable worker process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import UnsafeArchiveError
from .limits import ArchiveLimits
from .pt2_validator import validate_pt2_archive
from .specs import MethodSignature, ProgramDescription

if TYPE_CHECKING:
    from torch.export import ExportedProgram


def load_validated_programs(
    path: str | Path, limits: ArchiveLimits | None = None
) -> dict[str, ExportedProgram]:
    """Re-validate ``path``, force weights-only unpickling, and load every program in it.

    Meant to run INSIDE a disposable, resource-limited process (the compile worker or
    :func:`load_programs_isolated`): validation closes the known code paths, the process
    boundary contains whatever is left.  A ``torch.export.save`` archive yields ``{"model": ep}``.
    A pytree type torch does not know (a ``transformers`` ``ModelOutput``) is read as a plain
    container (:func:`pteforge.manager.loading.read_programs`); the archive's AOTInductor
    entries, refused by the validator, are never looked at.
    """
    validate_pt2_archive(path, limits)
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    from pteforge.manager.errors import ProgramInputError
    from pteforge.manager.loading import read_programs

    try:
        with open(path, "rb") as f:
            programs = read_programs(f)
    except ProgramInputError as exc:  # a pytree type it cannot read: one line, no class name
        raise UnsafeArchiveError("invalid_program", str(exc)) from None
    if not programs:
        raise ValueError("the archive holds no loadable exported program")
    return programs


def describe_programs(programs: dict[str, ExportedProgram]) -> ProgramDescription:
    """Specs of each program's user inputs and outputs."""
    return ProgramDescription(
        tuple(exported_method_spec(name, ep) for name, ep in sorted(programs.items()))
    )


def exported_method_spec(name: str, ep: ExportedProgram) -> MethodSignature:
    """The same :class:`MethodSignature` the static validator reads, taken from a live program:
    the manager's reading of a program's signature, tensors only."""
    from pteforge.manager.signature import method_signature

    return method_signature(name, ep, tensors_only=True)
