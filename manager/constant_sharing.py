"""Store a weight once when a delegate and the portable runtime both use it.

Upstream serialises a program's constants twice when a delegate (XNNPACK) and a portable
kernel use the same tensor (a tied embedding, or one weight in a delegated and a portable
method): once in the constant segment, read by portable kernels through
``Program.constant_segment.offsets``, and once as named data (``Program.named_data``), read
by the delegate through the program's ``NamedDataMap``. Portable constants cannot be read from
named data inside the ``.pte`` (``Method::parse_external_constants`` only consults an external
``.ptd`` map), but named data can point anywhere in the file: a ``NamedData`` entry names a
``DataSegment``, an ``(offset, size)`` range relative to the segment base. So named data whose
bytes equal a constant is given a segment covering that constant inside the constant segment
instead of a copy. The runtime loads either view of the same bytes (``PteDataMap`` loads a
named segment by its offset and size; upstream's ``deserialize_pte_binary`` slices the same way).

Only byte-identical blobs are shared: a weight XNNPACK rewrites ahead of time (convolution
weights permuted to NHWC, quantized or cast weights) is a different blob and stays a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO, cast

from executorch.exir._serialize._cord import Cord
from executorch.exir._serialize._flatbuffer_program import (
    _flatbuffer_to_program,
    _program_to_flatbuffer,
)
from executorch.exir._serialize._named_data_store import NamedDataStoreOutput
from executorch.exir._serialize._program import (
    PTEFile,
    _ExtendedHeader,
    _get_extended_header,
    _insert_flatbuffer_header,
    serialize_pte_binary,
)
from executorch.exir._serialize.data_serializer import DataEntry
from executorch.exir._serialize.padding import aligned_size, pad_to, padding_required
from executorch.exir.capture._config import ExecutorchBackendConfig
from executorch.exir.program import ExecutorchProgramManager
from executorch.exir.schema import Buffer, DataSegment, NamedData, Program
from executorch.exir.tensor import ALIGNMENT


@dataclass(frozen=True)
class _Alias:
    """Named-data keys whose bytes are constant ``constant_index`` of the program."""

    keys: tuple[str, ...]
    constant_index: int
    size: int
    alignment: int


def find_aliases(
    constants: Sequence[Buffer], named: NamedDataStoreOutput, tensor_alignment: int
) -> list[_Alias]:
    """Named data stored in the ``.pte`` whose bytes equal one of ``constants``."""
    by_size: dict[int, list[int]] = {}
    for index, buffer in enumerate(constants):
        if buffer.storage:
            by_size.setdefault(len(buffer.storage), []).append(index)
    entries: dict[int, list[tuple[str, DataEntry]]] = {}
    for key, entry in named.pte_data.items():
        entries.setdefault(entry.buffer_index, []).append((key, entry))
    aliases = []
    for buffer_index, keyed in entries.items():
        data = named.buffers[buffer_index]
        alignment = max(entry.alignment for _, entry in keyed)
        if not isinstance(data, bytes) or tensor_alignment % alignment:
            continue
        for index in by_size.get(len(data), []):
            if constants[index].storage == data:
                keys = tuple(key for key, _ in keyed)
                aliases.append(_Alias(keys, index, len(data), alignment))
                break
    return aliases


def _without(named: NamedDataStoreOutput, aliases: Sequence[_Alias]) -> dict[str, DataEntry]:
    aliased = {key for alias in aliases for key in alias.keys}
    return {k: e for k, e in named.pte_data.items() if k not in aliased}


def _add_alias_segments(program: Program, aliases: Sequence[_Alias]) -> None:
    """Point each alias's keys at its constant's bytes inside the constant segment."""
    constants = program.constant_segment
    base = program.segments[constants.segment_index].offset
    for alias in aliases:
        offset = base + constants.offsets[alias.constant_index]
        if offset % alias.alignment:
            raise AssertionError(f"constant at {offset} is not {alias.alignment}-byte aligned")
        program.segments.append(DataSegment(offset=offset, size=alias.size))
        index = len(program.segments) - 1
        program.named_data = list(program.named_data or [])
        program.named_data.extend(NamedData(key=key, segment_index=index) for key in alias.keys)


class _Pieces:
    """A write-only sink keeping what a ``Cord`` writes as references, to split it unread."""

    def __init__(self, cord: Cord) -> None:
        self.pieces: list[bytes] = []
        cord.write_to_file(cast(BinaryIO, self))

    def write(self, data: bytes) -> int:
        self.pieces.append(bytes(data))
        return len(data)

    def slice(self, start: int, end: int | None = None) -> Cord:
        """Bytes ``start:end`` as a Cord; only a piece cut by a bound is copied."""
        out, offset = Cord(), 0
        for piece in self.pieces:
            lo = max(start - offset, 0)
            hi = len(piece) if end is None else min(end - offset, len(piece))
            if lo < hi:
                out.append(piece if (lo, hi) == (0, len(piece)) else piece[lo:hi])
            offset += len(piece)
        return out


def _program_data(program: Program, config: ExecutorchBackendConfig, segment_size: int) -> bytes:
    """Flatbuffer of ``program`` with the extended header, as ``serialize_pte_binary`` writes."""
    result = _program_to_flatbuffer(
        program,
        constant_tensor_alignment=config.constant_tensor_alignment,
        delegate_alignment=config.delegate_alignment,
    )
    header_length = aligned_size(_ExtendedHeader.EXPECTED_LENGTH, result.max_alignment)
    program_size = header_length + len(result.data)
    header = _ExtendedHeader(
        program_size=program_size,
        segment_base_offset=aligned_size(program_size, config.segment_alignment),
        segment_data_size=segment_size,
    ).to_bytes()
    return _insert_flatbuffer_header(
        result.data, r"ET[0-9a-zA-Z][0-9a-zA-Z]", pad_to(header, header_length)
    )


def _with_aliases(
    serialized: Cord, aliases: Sequence[_Alias], config: ExecutorchBackendConfig
) -> Cord:
    """``serialized`` (a ``.pte`` with segments) with alias segments added to its program.

    Segment offsets are relative to the segment base, so the segment data is kept as is
    (by reference) and only the flatbuffer and header are rebuilt.
    """
    pieces = _Pieces(serialized)
    head = bytes(pieces.slice(0, 8 + _ExtendedHeader.EXPECTED_LENGTH))
    header = _get_extended_header(head)
    if header is None or header.segment_base_offset == 0:
        raise AssertionError("serialize_pte_binary wrote no segments for a constant segment")
    program = _flatbuffer_to_program(bytes(pieces.slice(0, header.program_size)))
    _add_alias_segments(program, aliases)
    out = Cord(_program_data(program, config, header.segment_data_size))
    out.append(b"\x00" * padding_required(len(out), config.segment_alignment))
    out.append(pieces.slice(header.segment_base_offset))
    return out


def share_constants(
    manager: ExecutorchProgramManager, config: ExecutorchBackendConfig | None = None
) -> Cord | None:
    """``manager``'s ``.pte`` with delegate named data aliased onto equal constants.

    None when nothing is stored twice (the upstream bytes are then the answer).
    """
    config = config or ExecutorchBackendConfig()
    named = getattr(manager, "_named_data", None)
    emitted = getattr(manager, "_emitter_output", None)
    if named is None or emitted is None or not named.pte_data:
        return None
    alignment = config.constant_tensor_alignment or ALIGNMENT
    aliases = find_aliases(emitted.program.constant_buffer, named, alignment)
    if not aliases:
        return None
    kept = NamedDataStoreOutput(
        buffers=named.buffers, pte_data=_without(named, aliases), external_data={}
    )
    return _with_aliases(_serialized(manager, config, kept), aliases, config)


def _serialized(
    manager: ExecutorchProgramManager,
    config: ExecutorchBackendConfig,
    named: NamedDataStoreOutput | None,
) -> Cord:
    """``manager``'s emitted program serialised as upstream does, with ``named`` data."""
    emitted = manager._emitter_output
    return serialize_pte_binary(
        PTEFile(
            program=emitted.program,
            mutable_data=emitted.mutable_data,
            named_data=named if named is not None and named.pte_data else None,
        ),
        extract_delegate_segments=config.extract_delegate_segments,
        segment_alignment=config.segment_alignment,
        constant_tensor_alignment=config.constant_tensor_alignment,
        delegate_alignment=config.delegate_alignment,
    )


def fill_empty_constant_segment(
    manager: ExecutorchProgramManager, config: ExecutorchBackendConfig | None = None
) -> bool:
    """Give a constant segment of zero bytes one aligned block of zeros; True if it did.

    A method whose only constants outside its delegates have no elements (a zero-size
    buffer) reads them from a constant segment of 0 bytes. ExecuTorch's file and mmap
    loaders load an empty range as a null pointer, and the runtime then takes the inline
    ``constant_buffer`` path its builds disable: ``load_method`` fails with InvalidProgram
    for a ``.pte`` loaded from a file (as the runtime workers and devices load it), while
    the same bytes load from memory. The padding follows the last constant; no offset moves.
    """
    config = config or ExecutorchBackendConfig()
    buffers = manager._emitter_output.program.constant_buffer
    if len(buffers) < 2 or any(buffer.storage for buffer in buffers):
        return False
    buffers[-1].storage = bytes(config.constant_tensor_alignment or ALIGNMENT)
    manager._pte_data = _serialized(manager, config, getattr(manager, "_named_data", None))
    manager._buffer = None
    return True


def store_shared_once(
    manager: ExecutorchProgramManager, config: ExecutorchBackendConfig | None = None
) -> bool:
    """Make ``manager.buffer`` the ``.pte`` of :func:`share_constants`; True if it changed."""
    data = share_constants(manager, config)
    if data is None or not hasattr(manager, "_pte_data"):
        return False
    manager._pte_data = data
    manager._buffer = None
    return True
