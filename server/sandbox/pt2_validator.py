"""Static allowlist validation of an uploaded pt2 archive (zipfile + json; no torch)."""

from __future__ import annotations

import io
import pickletools
import zipfile
from pathlib import Path

from pteforge.contracts.saved_files import other_format

from . import pt2_format as fmt
from .errors import UnsafeArchiveError, UploadTooLargeError
from .limits import ArchiveLimits
from .pickle_checks import check_torch_save_bytes
from .pt2_grammars import literal
from .pt2_json import check_model_json, check_payload_config, method_spec, parse_json
from .specs import ArchiveManifest, MethodSignature
from .zip_checks import ZipIndex, open_checked_zip, read_entry

_SMALL_ENTRY_BYTES = 4096
_SAMPLE_INPUTS_BYTES = 256 * 1024 * 1024


def validate_pt2_archive(path: str | Path, limits: ArchiveLimits | None = None) -> ArchiveManifest:
    """Prove a pt2 archive holds only data before any torch code reads it.

    Rejects (``UploadRejectedError`` with a ``reason``) pickled payloads, custom/opaque objects,
    native code, guard code and sympy expressions outside a safe grammar, operators that the
    installed torch does not register or that are denied (:mod:`.operators`), tensors that
    declare more bytes than they carry, and zip tricks.  Returns the method names and their
    input/output specs.
    """
    limits = limits or ArchiveLimits()
    zf, index = _open_program_zip(Path(path), limits)
    with zf:
        models = _check_entry_names(index, limits)
        _check_fixed_entries(zf, index)
        record_sizes = {
            rel: info.file_size
            for rel, info in index.entries.items()
            if rel.startswith((fmt.WEIGHTS_DIR, fmt.CONSTANTS_DIR))
        }
        declared = 0
        methods: list[MethodSignature] = []
        for model in models:
            spec, nbytes = _check_model(zf, index, model, record_sizes, limits)
            methods.append(spec)
            declared += nbytes
    if declared > limits.max_declared_tensor_bytes:
        raise UploadTooLargeError(
            "archive_too_large",
            f"tensors declare {declared} bytes (limit {limits.max_declared_tensor_bytes})",
        )
    return ArchiveManifest(index.root, tuple(methods), declared, len(index.entries))


def check_pt2_container(path: str | Path, limits: ArchiveLimits | None = None) -> None:
    """The zip-level part of :func:`validate_pt2_archive`: sizes, ratios, entry names and the
    fixed entries, without parsing a document. What the server runs itself: a ``models/*.json``
    of 64 MiB ``[[],[],...]`` is about 1.5 GiB once parsed, so the documents are parsed (and
    validated in full) only in the disposable child that then loads the archive."""
    limits = limits or ArchiveLimits()
    zf, index = _open_program_zip(Path(path), limits)
    with zf:
        _check_entry_names(index, limits)
        _check_fixed_entries(zf, index)


def _open_program_zip(path: Path, limits: ArchiveLimits) -> tuple[zipfile.ZipFile, ZipIndex]:
    """:func:`open_checked_zip`, refusing with what the file is instead when it is another
    torch save format (``torch.save``, TorchScript, an older ``torch.export.save``, whose
    entries have no root folder): its entries would otherwise be "unknown" or "unsafe"."""
    try:
        zf, index = open_checked_zip(path, limits)
    except UnsafeArchiveError as exc:
        if exc.reason == "unsafe_entry_name" and (other := _rootless_format(path)):
            raise UnsafeArchiveError("invalid_program", f"{other}: {fmt.SAVE_AGAIN}") from exc
        raise
    if other := other_format(index.entries):
        zf.close()
        raise UnsafeArchiveError("invalid_program", f"{other}: {fmt.SAVE_AGAIN}")
    return zf, index


def _rootless_format(path: Path) -> str | None:
    """The other format of a zip whose entries have no root folder (its central directory was
    read and its entry count checked already), if known."""
    with zipfile.ZipFile(path) as zf:
        return other_format(zf.namelist())


def _check_entry_names(index: ZipIndex, limits: ArchiveLimits) -> list[str]:
    models = []
    for rel, info in index.entries.items():
        for pattern, reason, message in fmt.DANGEROUS_ENTRIES:
            if pattern.search(rel):
                raise UnsafeArchiveError(reason, message, info.filename)
        match = fmt.ALLOWED_ENTRY.match(rel)
        if match is None:
            raise UnsafeArchiveError(
                "unknown_entry", "not part of a pt2 program archive", info.filename
            )
        if match.group("model"):
            models.append(match.group("model"))
    if not models:
        raise UnsafeArchiveError("invalid_program", "the archive holds no models/*.json program")
    if len(models) > limits.max_methods:
        raise UnsafeArchiveError(
            "too_many_methods", f"{len(models)} programs (limit {limits.max_methods})"
        )
    return sorted(models)


def _check_fixed_entries(zf: zipfile.ZipFile, index: ZipIndex) -> None:
    expected = {
        fmt.ARCHIVE_FORMAT_PATH: fmt.ARCHIVE_FORMAT_VALUE,
        fmt.ARCHIVE_VERSION_PATH: fmt.ARCHIVE_VERSION_VALUE,
        "byteorder": "little",
    }
    for rel, value in expected.items():
        if rel not in index.entries:
            raise UnsafeArchiveError("invalid_program", f"{rel} is missing")
        found = read_entry(zf, index, rel, _SMALL_ENTRY_BYTES)
        if found != value.encode():
            why = fmt.VERSION_MISMATCH if rel == fmt.ARCHIVE_VERSION_PATH else ""
            raise UnsafeArchiveError(
                "invalid_program", f"expected {value!r}, found {found[:40]!r}{why}", rel
            )


def _check_model(
    zf: zipfile.ZipFile,
    index: ZipIndex,
    model: str,
    record_sizes: dict[str, int],
    limits: ArchiveLimits,
) -> tuple[MethodSignature, int]:
    entry = fmt.MODELS_FILENAME_FORMAT.format(model)
    doc = parse_json(read_entry(zf, index, entry, limits.max_json_bytes), entry)
    check_model_json(doc, entry, limits)
    declared = 0
    for fmt_string, directory in (
        (fmt.WEIGHTS_CONFIG_FILENAME_FORMAT, fmt.WEIGHTS_DIR),
        (fmt.CONSTANTS_CONFIG_FILENAME_FORMAT, fmt.CONSTANTS_DIR),
    ):
        config_entry = _required(index, fmt_string.format(model))
        config = parse_json(
            read_entry(zf, index, config_entry, limits.max_json_bytes), config_entry
        )
        declared += check_payload_config(config, config_entry, directory, record_sizes)
    samples = _required(index, fmt.SAMPLE_INPUTS_FILENAME_FORMAT.format(model))
    data = read_entry(zf, index, samples, _SAMPLE_INPUTS_BYTES)
    check_torch_save_bytes(data, samples, limits)
    _check_sample_strings(data, samples, limits)
    return method_spec(model, doc, entry), declared


def _check_sample_strings(data: bytes, entry: str, limits: ArchiveLimits) -> None:
    """Every string of the sample inputs (already scanned: data only) is a literal: the keys
    of their dictionaries, ``repr()``'d, land in a double-quoted guard message that
    ``ep.module()`` exec's, so a double quote in one ends the message and runs the rest."""
    inner, inner_index = open_checked_zip(io.BytesIO(data), limits)
    with inner:
        pickled = read_entry(inner, inner_index, "data.pkl", _SAMPLE_INPUTS_BYTES)
    for opcode, arg, _pos in pickletools.genops(pickled):
        if isinstance(arg, str) and opcode.name.endswith("UNICODE") and (why := literal(arg)):
            raise UnsafeArchiveError(
                "unsafe_string", f"sample input string {arg[:80]!r}: {why}", entry
            )


def _required(index: ZipIndex, rel: str) -> str:
    if rel not in index.entries:
        raise UnsafeArchiveError("invalid_program", f"{rel} is missing")
    return rel
