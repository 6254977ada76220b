"""Container-level checks of an uploaded zip before any entry is interpreted."""

from __future__ import annotations

import io
import re
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import UnsafeArchiveError, UploadTooLargeError
from .limits import MIB, ArchiveLimits

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$")
_LOCAL_HEADER_SIZE = 30
_CENTRAL_HEADER_SIZE = 46  # a central directory entry's fixed part; 3 lengths at byte 28
PTE_IDENTIFIER = b"ET12"
"""Bytes 4..8 of an ExecuTorch ``.pte``."""
ZIP_MAGIC = b"PK\x03\x04"
"""The first bytes of a zip archive (a torch.export ``.pt2``): its first local header."""
_BOMB_FLOOR_BYTES = 1 * MIB  # tiny entries compress oddly; only judge ratios above this


def _what_else(magic: bytes) -> str:
    """What a file that is not a zip may be instead, told by its first 8 bytes: a
    safetensors file starts with its little-endian header length (a few KiB at most)."""
    if magic[4:8] == b"\0\0\0\0" and 0 < struct.unpack("<I", magic[:4])[0] < 100 * MIB:
        return (
            " (a safetensors file? it holds weights only, not the program: export the "
            "model with torch.export and save it with torch.export.save)"
        )
    return ""


@dataclass(frozen=True)
class ZipIndex:
    """A checked zip: its single root folder and entries keyed by path below that root."""

    root: str
    entries: dict[str, zipfile.ZipInfo]
    total_uncompressed: int


def open_checked_zip(
    source: Path | io.BytesIO, limits: ArchiveLimits
) -> tuple[zipfile.ZipFile, ZipIndex]:
    """Open ``source`` as a zip and reject container tricks; the caller closes the zip."""
    if isinstance(source, io.BytesIO):
        magic = source.getvalue()[:8]
        entries = _count_entries(source, limits.max_entries + 1)
    else:
        with open(source, "rb") as f:
            magic = f.read(8)
            entries = _count_entries(f, limits.max_entries + 1)
    if magic[4:8] == PTE_IDENTIFIER:
        raise UnsafeArchiveError(
            "not_a_zip",
            "the file is an ExecuTorch .pte, not a torch.export .pt2 archive: "
            "upload a .pte as an artifact (POST /v1/artifacts, part 'pte')",
        )
    if magic[:4] != ZIP_MAGIC:
        raise UnsafeArchiveError("not_a_zip", "the file is not a zip archive" + _what_else(magic))
    if entries > limits.max_entries:
        raise UnsafeArchiveError(
            "too_many_entries",
            f"more than {limits.max_entries} entries (limit {limits.max_entries})",
        )
    try:
        zf = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise UnsafeArchiveError("not_a_zip", f"the file is not a readable zip: {e}") from e
    try:
        return zf, _index(zf, limits)
    except BaseException:
        zf.close()
        raise


def _count_entries(fp: BinaryIO, most: int) -> int:
    """The central directory's entries, counted up to ``most`` by walking their headers
    (not the count the end record declares): ``zipfile.ZipFile`` builds a ``ZipInfo`` for
    every one before its count can be checked, about 450 bytes and 20 us each, so a 2 GiB
    upload of 49-byte entries would take the server about 20 GiB. 0 when there is no end
    record (``ZipFile`` says why)."""
    end = zipfile._EndRecData(fp)  # type: ignore[attr-defined]  # its own, as ZipFile does
    if end is None:
        return 0
    size = end[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
    start = end[zipfile._ECD_LOCATION] - size  # type: ignore[attr-defined]
    if end[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:  # type: ignore[attr-defined]
        start -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator  # type: ignore[attr-defined]
    fp.seek(max(start, 0))
    count = walked = 0
    while walked < size and count < most:
        head = fp.read(_CENTRAL_HEADER_SIZE)
        if len(head) < _CENTRAL_HEADER_SIZE or head[:4] != b"PK\x01\x02":
            break  # ZipFile refuses the directory
        walked += _CENTRAL_HEADER_SIZE + sum(struct.unpack_from("<3H", head, 28))
        fp.seek(start + walked)
        count += 1
    return count


def _index(zf: zipfile.ZipFile, limits: ArchiveLimits) -> ZipIndex:
    infos = zf.infolist()
    if len(infos) > limits.max_entries:
        raise UnsafeArchiveError(
            "too_many_entries", f"{len(infos)} entries (limit {limits.max_entries})"
        )
    if not infos:
        raise UnsafeArchiveError("not_a_zip", "the archive is empty")
    root = infos[0].filename.split("/", 1)[0]
    entries: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        rel = _check_entry(info, root, limits)
        if rel in entries:
            raise UnsafeArchiveError("duplicate_entry", "the name occurs twice", info.filename)
        entries[rel] = info
        total += info.file_size
    if total > limits.max_total_uncompressed:
        raise UploadTooLargeError(
            "archive_too_large",
            f"entries expand to {total} bytes (limit {limits.max_total_uncompressed})",
        )
    _check_no_overlap(infos, zf.start_dir)
    return ZipIndex(root=root, entries=entries, total_uncompressed=total)


def _check_entry(info: zipfile.ZipInfo, root: str, limits: ArchiveLimits) -> str:
    name = info.filename
    parts = name.split("/")
    if not _SAFE_NAME.match(name) or any(p in (".", "..") for p in parts):
        raise UnsafeArchiveError("unsafe_entry_name", "path traversal or unsafe characters", name)
    if len(parts) < 2 or parts[0] != root:
        raise UnsafeArchiveError(
            "unsafe_entry_name", f"entry outside the root folder {root!r}", name
        )
    if info.flag_bits & 0x1:
        raise UnsafeArchiveError("unsafe_zip", "encrypted entry", name)
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise UnsafeArchiveError("unsafe_zip", f"compression method {info.compress_type}", name)
    ratio = info.file_size / max(info.compress_size, 1)
    if info.file_size > _BOMB_FLOOR_BYTES and ratio > limits.max_compression_ratio:
        raise UploadTooLargeError("zip_bomb", f"compression ratio {ratio:.0f} is too high", name)
    return "/".join(parts[1:])


def _check_no_overlap(infos: list[zipfile.ZipInfo], central_dir_offset: int) -> None:
    """Entries sharing bytes (overlapping-file zip bombs, parser confusion) are refused."""
    ordered = sorted(infos, key=lambda i: i.header_offset)
    ends = [i.header_offset for i in ordered[1:]] + [central_dir_offset]
    for info, limit in zip(ordered, ends, strict=True):
        end = info.header_offset + _LOCAL_HEADER_SIZE + len(info.orig_filename) + info.compress_size
        if end > limit:
            raise UnsafeArchiveError("unsafe_zip", "entry overlaps the next one", info.filename)


def read_entry(zf: zipfile.ZipFile, index: ZipIndex, rel: str, max_bytes: int) -> bytes:
    """Read one entry, never inflating more than ``max_bytes`` whatever its header claims."""
    info = index.entries[rel]
    if info.file_size > max_bytes:
        raise UploadTooLargeError(
            "entry_too_large", f"{info.file_size} bytes (limit {max_bytes})", info.filename
        )
    try:
        with zf.open(info) as f:
            data = f.read(max_bytes + 1)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise UnsafeArchiveError("corrupt_zip", f"cannot be read: {e}", info.filename) from e
    if len(data) > max_bytes:
        raise UploadTooLargeError(
            "entry_too_large", f"inflates past {max_bytes} bytes", info.filename
        )
    return data
