"""Framing of messages between the pool and its workers: JSON headers plus raw tensor bytes.

Nothing here unpickles: a message is one JSON frame followed by one frame of raw bytes per
tensor, whose dtype (from a fixed allow-list) and shape travel in the header.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from pteforge.runtime.dtypes import NUMPY_TO_OIP
from pteforge.runtime.errors import RuntimeLayerError

_ALLOWED_DTYPES = {dt.str: dt for dt in NUMPY_TO_OIP}


def tensor_header(array: np.ndarray) -> dict[str, Any]:
    """The JSON description of ``array`` that precedes its bytes."""
    if array.dtype not in NUMPY_TO_OIP:
        raise RuntimeLayerError(f"dtype {array.dtype} cannot be sent to a worker")
    return {"dtype": array.dtype.str, "shape": list(array.shape)}


def send_message(conn: Connection, header: dict[str, Any], arrays: Sequence[np.ndarray]) -> None:
    """Send ``header`` and ``arrays`` as one message."""
    contiguous = [np.ascontiguousarray(a) for a in arrays]
    frame = dict(header, tensors=[tensor_header(a) for a in contiguous])
    conn.send_bytes(json.dumps(frame).encode())
    for array in contiguous:
        conn.send_bytes(array.reshape(-1).view(np.uint8).data)


def _empty_array(spec: dict[str, Any]) -> np.ndarray:
    dtype = _ALLOWED_DTYPES.get(str(spec.get("dtype")))
    if dtype is None:
        raise RuntimeLayerError(f"unexpected dtype {spec.get('dtype')!r} on the wire")
    return np.empty([int(d) for d in spec["shape"]], dtype=dtype)


def recv_message(conn: Connection) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Receive one message sent by ``send_message``; raises ``EOFError`` if the peer died."""
    header: dict[str, Any] = json.loads(conn.recv_bytes())
    arrays = []
    for spec in header.pop("tensors", []):
        array = _empty_array(spec)
        received = conn.recv_bytes_into(array.reshape(-1).view(np.uint8))
        if received != array.nbytes:
            raise RuntimeLayerError(f"tensor frame of {received} bytes, expected {array.nbytes}")
        arrays.append(array)
    return header, arrays
