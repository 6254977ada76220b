"""Static check of the only pickle a valid pt2 archive holds: its sample inputs.

The loader tries a weights-only ``torch.load`` and on failure retries with full unpickling,
so the bytes themselves must be harmless.  A ``torch.save`` zip is
accepted only if its ``data.pkl`` uses plain data opcodes and a handful of tensor-rebuilding
globals; no opcode list is interpreted, only scanned.
"""

from __future__ import annotations

import io
import pickletools
import re

from .errors import UnsafeArchiveError
from .limits import ArchiveLimits
from .zip_checks import open_checked_zip, read_entry

_ALLOWED_OPCODES = frozenset(
    [
        "PROTO",
        "FRAME",
        "MARK",
        "STOP",
        "POP",
        "POP_MARK",
        "DUP",
        "PUT",
        "BINPUT",
        "LONG_BINPUT",
        "GET",
        "BINGET",
        "LONG_BINGET",
        "MEMOIZE",
        "TUPLE",
        "TUPLE1",
        "TUPLE2",
        "TUPLE3",
        "EMPTY_TUPLE",
        "EMPTY_LIST",
        "EMPTY_DICT",
        "EMPTY_SET",
        "LIST",
        "DICT",
        "APPEND",
        "APPENDS",
        "SETITEM",
        "SETITEMS",
        "ADDITEMS",
        "FROZENSET",
        "NONE",
        "NEWTRUE",
        "NEWFALSE",
        "INT",
        "BININT",
        "BININT1",
        "BININT2",
        "LONG",
        "LONG1",
        "LONG4",
        "FLOAT",
        "BINFLOAT",
        "BINUNICODE",
        "SHORT_BINUNICODE",
        "BINUNICODE8",
        "UNICODE",
        "BINBYTES",
        "SHORT_BINBYTES",
        "BINBYTES8",
        "GLOBAL",
        "REDUCE",
        "BINPERSID",
    ]
)
_STORAGES = "Float Double Half BFloat16 Long Int Short Char Byte Bool ComplexFloat ComplexDouble"
_ALLOWED_GLOBALS = frozenset(
    {
        "torch._utils _rebuild_tensor_v2",
        "torch._utils _rebuild_parameter",
        "collections OrderedDict",
        "torch Size",
    }
    | {f"torch {kind}Storage" for kind in _STORAGES.split()}
)
_TORCH_SAVE_ENTRY = re.compile(
    r"^(data\.pkl|data/\d+|version|\.format_version|\.storage_alignment|byteorder"
    r"|\.data/serialization_id|\.data/version)$"
)
_MAX_PICKLE_BYTES = 16 * 1024 * 1024


def check_torch_save_bytes(data: bytes, entry: str, limits: ArchiveLimits) -> None:
    """Accept a ``torch.save`` zip of tensors, tuples, dicts and scalars only."""
    try:
        zf, index = open_checked_zip(io.BytesIO(data), limits)
    except UnsafeArchiveError as e:
        raise UnsafeArchiveError("unsafe_sample_inputs", e.message, entry) from e
    with zf:
        for rel in index.entries:
            if not _TORCH_SAVE_ENTRY.match(rel):
                raise UnsafeArchiveError("unsafe_sample_inputs", f"unexpected entry {rel!r}", entry)
        if "data.pkl" not in index.entries:
            raise UnsafeArchiveError("unsafe_sample_inputs", "no data.pkl", entry)
        check_pickle_opcodes(read_entry(zf, index, "data.pkl", _MAX_PICKLE_BYTES), entry)


def check_pickle_opcodes(data: bytes, entry: str) -> None:
    """Scan (never run) a pickle: only data opcodes and allowlisted tensor globals pass."""
    try:
        for opcode, arg, _pos in pickletools.genops(data):
            if opcode.name not in _ALLOWED_OPCODES:
                raise UnsafeArchiveError(
                    "pickle_payload", f"pickle opcode {opcode.name} is not allowed", entry
                )
            if opcode.name == "GLOBAL" and str(arg) not in _ALLOWED_GLOBALS:
                raise UnsafeArchiveError(
                    "pickle_payload", f"pickle global {arg!r} is not allowed", entry
                )
    except (ValueError, EOFError) as e:
        raise UnsafeArchiveError("pickle_payload", f"malformed pickle: {e}", entry) from e
