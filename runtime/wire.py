"""Framing of messages between the pool and its workers: JSON header plus raw tensor bytes.

Nothing here unpickles. A message is a single frame (one write, one read: a round trip
costs two pipe transfers however many tensors there are): an 8-byte little-endian header
length, the JSON header, then each tensor's raw bytes, whose dtype (from a fixed
allow-list) and shape travel in the header.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import orjson

from pteforge.runtime.dtypes import NUMPY_TO_OIP
from pteforge.runtime.errors import RuntimeLayerError

_ALLOWED_DTYPES = {dt.str: dt for dt in NUMPY_TO_OIP}
_LENGTH_BYTES = 8


def tensor_header(array: np.ndarray) -> dict[str, Any]:
    """The JSON description of ``array`` that precedes its bytes."""
    if array.dtype not in NUMPY_TO_OIP:
        raise RuntimeLayerError(f"dtype {array.dtype} cannot be sent to a worker")
    return {"dtype": array.dtype.str, "shape": list(array.shape)}


def dumps(value: Any) -> bytes:
    """JSON bytes of ``value``: orjson, or the standard library for what orjson refuses
    (numpy scalars in a profile, integers beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


def encode_message(header: dict[str, Any], arrays: Sequence[np.ndarray]) -> bytes:
    """One frame holding ``header`` and the bytes of ``arrays``."""
    contiguous = [np.ascontiguousarray(a) for a in arrays]
    head = dumps(dict(header, tensors=[tensor_header(a) for a in contiguous]))
    parts: list[Any] = [len(head).to_bytes(_LENGTH_BYTES, "little"), head]
    parts.extend(contiguous)  # joined straight from the arrays' buffers: one copy
    return b"".join(parts)


def _dtype(spec: dict[str, Any]) -> np.dtype:
    dtype = _ALLOWED_DTYPES.get(str(spec.get("dtype")))
    if dtype is None:
        raise RuntimeLayerError(f"unexpected dtype {spec.get('dtype')!r} on the wire")
    return dtype


def decode_message(frame: bytes | bytearray) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Split a frame made by ``encode_message``; arrays are views into ``frame``."""
    head_end = _LENGTH_BYTES + int.from_bytes(frame[:_LENGTH_BYTES], "little")
    header: dict[str, Any] = orjson.loads(memoryview(frame)[_LENGTH_BYTES:head_end])
    arrays, offset = [], head_end
    for spec in header.pop("tensors", []):
        dtype, shape = _dtype(spec), [int(d) for d in spec["shape"]]
        count = math.prod(shape)
        if offset + count * dtype.itemsize > len(frame):
            raise RuntimeLayerError("a tensor frame is shorter than its header says")
        arrays.append(np.frombuffer(frame, dtype, count, offset).reshape(shape))
        offset += count * dtype.itemsize
    if offset != len(frame):
        raise RuntimeLayerError(f"{len(frame) - offset} stray bytes after the tensors")
    return header, arrays


def send_message(conn: Connection, header: dict[str, Any], arrays: Sequence[np.ndarray]) -> None:
    """Send ``header`` and ``arrays`` as one frame."""
    conn.send_bytes(encode_message(header, arrays))


def recv_message(
    conn: Connection, writable: bool = False
) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Receive one message; ``writable`` copies the frame so arrays may be written to.

    Raises ``EOFError`` if the peer died.
    """
    frame = conn.recv_bytes()
    return decode_message(bytearray(frame) if writable else frame)
