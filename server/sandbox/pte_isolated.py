"""Validate an uploaded ``.pte`` by loading it in a disposable worker process."""

from __future__ import annotations

from pathlib import Path

from pteforge.contracts.names import InvalidMethodNameError, check_method_name

from .digests import sha256_file
from .errors import InvalidPteError, UploadRejectedError
from .isolation import Isolation, SubprocessIsolation, read_result
from .limits import ProcessLimits
from .specs import ProgramDescription, PteDescription
from .zip_checks import PTE_IDENTIFIER, ZIP_MAGIC

_WORKER = "pteforge.server.sandbox.pte_worker"
PTD_IDENTIFIER = b"FT01"  # a FlatTensor file's, where a .pte has ET12
_PTD_REASONS = ("invalid_ptd",)
_CRASH_HINT = (
    " (a program whose weights are in a separate .ptd file, as XNNPACK's external weights "
    "put them, crashes ExecuTorch's loader without it: if it has one, send that file with it, "
    "as the upload's 'ptd' part (`pteforge deploy model.pte NAME --ptd model.ptd`))"
)
_ZIP_HINT = (
    ": the file is a zip archive, as a torch.export .pt2 program is: upload a program "
    "(POST /v1/programs, or `pteforge push`) and compile it to a .pte"
)


def _magic(path: Path) -> bytes:
    """The file's first 8 bytes: a flatbuffer's size and file identifier."""
    with open(path, "rb") as f:
        return f.read(8)


def _check_method_names(described: ProgramDescription) -> None:
    """A program's methods follow the method-name rules at upload too."""
    for name in described.method_names:
        try:
            check_method_name(name)
        except InvalidMethodNameError as e:
            raise InvalidPteError("invalid_pte", str(e)) from None


def _checked_ptd(path: Path) -> Path:
    """``path`` if it starts as a FlatTensor file (``.ptd``) does."""
    if _magic(path)[4:8] != PTD_IDENTIFIER:
        raise InvalidPteError(
            "invalid_ptd",
            "the .ptd (part 'ptd') is not an ExecuTorch data file (no FT01 identifier)",
        )
    return path


def validate_pte_isolated(
    path: str | Path,
    expected_sha256: str | None = None,
    limits: ProcessLimits | None = None,
    isolation: Isolation | None = None,
    data: str | Path | None = None,
) -> PteDescription:
    """Check the sha256, then load every method with ``InternalConsistency`` verification.

    Loading happens in a child process: a malformed program that crashes (SIGSEGV/SIGABRT),
    hangs or exhausts memory raises ``InvalidPteError`` (reason ``invalid_pte``) here instead of
    taking the caller down.  ``expected_sha256`` (e.g. the stored digest) is checked first and
    again by the child on the exact bytes it loads. The child also reads the runner metadata
    of a language model (``generation``, :mod:`pteforge.runtime.runner_metadata`).

    ``data``: the ``.ptd`` (FlatTensor) holding the constants the program keeps outside
    (program-data separation); loaded with it, its sha256 checked in the child too. A
    ``.ptd`` that does not fit is ``invalid_ptd``. One sent with a program that needs none is
    taken if it loads with it (the runtime reads only what a method asks for): whether a
    program needs data cannot be probed safely, as ExecuTorch 1.5.1 crashes loading an
    XNNPACK program without the external weights it names.
    """
    path = Path(path)
    digest = sha256_file(path)
    if expected_sha256 is not None and digest != expected_sha256.lower():
        raise InvalidPteError(
            "sha256_mismatch", f"content hashes to {digest}, expected {expected_sha256}"
        )
    magic = _magic(path)
    if magic[4:8] != PTE_IDENTIFIER:
        raise InvalidPteError(
            "invalid_pte",
            "not an ExecuTorch program (no ET12 identifier)"
            + (_ZIP_HINT if magic[:4] == ZIP_MAGIC else ""),
        )
    args = [str(path.resolve()), digest]
    if data is not None:
        args += [str(_checked_ptd(Path(data)).resolve()), sha256_file(data)]
    try:
        isolation = isolation or SubprocessIsolation()
        reply = isolation.run(_WORKER, args, limits or ProcessLimits())
        described = read_result(ProgramDescription, reply)
    except UploadRejectedError as e:
        if e.reason in _PTD_REASONS:
            raise InvalidPteError(e.reason, e.message) from e
        hint = _CRASH_HINT if e.reason == "worker_crashed" and data is None else ""
        raise InvalidPteError("invalid_pte", f"{e.reason}: {e.message}{hint}") from e
    _check_method_names(described)
    return PteDescription(digest, path.stat().st_size, described.methods, described.generation)
