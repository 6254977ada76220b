"""Program uploads: validate every archive (never trusting it), describe, then store.

Two upload forms reach here with their files already on disk: one part per method (each
a ``torch.export.save`` archive, stored together as a bundle) or one ``program`` part
holding a pt2 archive with several programs (stored as uploaded).
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pteforge.contracts import InvalidMethodNameError, check_method_name
from pteforge.contracts.names import (
    PROGRAM_NAME_MAX_CHARS,
    InvalidProgramNameError,
    check_program_name,
)
from pteforge.server.common.blob_files import check_quota, store_project_files
from pteforge.server.common.owned_rows import OwnedRows
from pteforge.server.common.services import Services
from pteforge.server.errors import InvalidUploadError
from pteforge.server.http.uploads import MultipartUpload, UploadedPart
from pteforge.server.programs.bundle import write_bundle
from pteforge.storage.domain import MethodSignature, Program

PROGRAM_PART = "program"
_PARALLEL_LOADS = 4


def check_part_name(name: str) -> None:
    """Refuse a file part whose field name cannot be a method name (422, stating the rule)."""
    try:
        check_method_name(name)
    except InvalidMethodNameError as exc:
        raise InvalidUploadError(f"part {exc}") from None


def _describe(services: Services, part: UploadedPart) -> tuple[MethodSignature, ...]:
    """Method specs of a part's archive: validated statically, then loaded in a disposable
    process. A refusal names the part it came from."""
    from pteforge.server.sandbox import UploadRejectedError, load_programs_isolated

    try:
        description = load_programs_isolated(
            part.path, services.process_limits, isolation=services.isolation
        )
    except UploadRejectedError as exc:
        raise exc.in_part(part.field_name) from None
    return description.methods


def _file_parts(upload: MultipartUpload) -> list[UploadedPart]:
    if not upload.files:
        raise InvalidUploadError(
            "no file parts: send one part per method (field name = method name) "
            "or one 'program' part holding a pt2 archive"
        )
    names = [p.field_name for p in upload.files]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidUploadError(f"repeated parts: {', '.join(duplicates)}")
    if PROGRAM_PART in names and len(names) > 1:
        raise InvalidUploadError("a 'program' part cannot be combined with per-method parts")
    for name in names:
        check_part_name(name)
    return upload.files


def _program_name(upload: MultipartUpload, default: str) -> str:
    """The ``name`` field, checked by the program-name rule (422 naming the field), else
    ``default`` (a part's file name, cut to the rule's length, or ``program``), without the
    control characters the rule refuses (an escape sequence in a listing's terminal)."""
    name = upload.fields.get("name")
    if not name:
        printable = "".join(c for c in default if c.isprintable() or c == " ")
        return printable[:PROGRAM_NAME_MAX_CHARS] or "program"
    try:
        return check_program_name(name)
    except InvalidProgramNameError as exc:
        raise InvalidUploadError(f"field 'name': {exc}") from None


def _single_method(services: Services, part: UploadedPart) -> MethodSignature:
    specs = _describe(services, part)
    if len(specs) != 1:
        names = ", ".join(spec.name for spec in specs)
        raise InvalidUploadError(
            f"part {part.field_name!r} holds {len(specs)} programs ({names}); a per-method "
            f"part holds one: send a multi-method archive alone, as the part {PROGRAM_PART!r}"
        )
    return specs[0].renamed(part.field_name)


def create_program(services: Services, project_id: str, upload: MultipartUpload) -> Program:
    """Validate, describe and store an uploaded program (runs in a worker thread)."""
    parts = _file_parts(upload)
    archive = parts[0].field_name == PROGRAM_PART  # one pt2 archive, named by its file
    name = _program_name(upload, (parts[0].filename if archive else None) or "program")
    if archive:
        methods = _describe(services, parts[0])
        paths = [parts[0].path]
        (blob,) = store_project_files(services.store, services.settings, project_id, paths)
    else:
        # Each part is loaded in its own disposable process; run them side by side.
        with ThreadPoolExecutor(max_workers=min(len(parts), _PARALLEL_LOADS)) as pool:
            methods = tuple(pool.map(lambda part: _single_method(services, part), parts))
        with tempfile.TemporaryDirectory(dir=services.settings.uploads_dir) as scratch:
            bundle = Path(scratch) / "bundle.zip"
            write_bundle({p.field_name: p.path for p in parts}, bundle)
            paths = [bundle]
            (blob,) = store_project_files(services.store, services.settings, project_id, paths)
    with services.store.transaction() as tx:
        check_quota(tx, services.settings, project_id, blob.size)
        return tx.programs.create(project_id, name, blob, methods)


# Deleting a program leaves its artifacts (their program_id becomes null).
PROGRAMS: OwnedRows[Program] = OwnedRows("program", lambda tx: tx.programs)
