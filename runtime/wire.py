"""Framing of messages between the pool and its workers: JSON header plus raw tensor bytes.

Nothing here unpickles. A message is a single frame (one write, one read: a round trip
costs two pipe transfers however many tensors there are): an 8-byte little-endian header
length, the JSON header ``{"tensors": [{"dtype", "shape"}, ...], "message": {...}}``, then
each tensor's raw bytes. The message is typed (:mod:`pteforge.contracts.runtime_messages`)
and validated by the reader; each tensor's dtype comes from a fixed allow-list and its
shape is checked against the bytes that follow.

The contracts are plain fields (no aliases, no custom serializers), so the writer lets
orjson write a model's fields as they are: a microsecond less per message than
``model_dump_json``, which stays the fallback for what orjson refuses.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import numpy as np
import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from pteforge.contracts.oip import NUMPY_TO_OIP
from pteforge.contracts.runtime_messages import (
    WORKER_REPLY,
    WORKER_REQUEST,
    WorkerReply,
    WorkerRequest,
)
from pteforge.runtime.errors import RuntimeLayerError

_ALLOWED_DTYPES = {dt.str: dt for dt in NUMPY_TO_OIP}
_LENGTH_BYTES = 8
_HEADER_KEYS = {"tensors", "message"}
_TENSOR_KEYS = {"dtype", "shape"}
_SIZE, _LONG_SIZE = struct.Struct("!i"), struct.Struct("!Q")  # multiprocessing's framing
_ONE_WRITE = 16384  # multiprocessing writes a frame up to this size with its length, at once
_SMALL_FRAME = 64 * 1024  # read whole into a bytes; larger ones into a buffer, in pieces

Message = TypeVar("Message")
Frame = bytes | bytearray | memoryview


def tensor_header(array: np.ndarray) -> dict[str, Any]:
    """The JSON description of ``array`` that precedes its bytes."""
    if array.dtype not in NUMPY_TO_OIP:
        raise RuntimeLayerError(f"dtype {array.dtype} cannot be sent to a worker")
    return {"dtype": array.dtype.str, "shape": array.shape}


def dumps(value: Any) -> bytes:
    """JSON bytes of ``value``: orjson, or the standard library for what orjson refuses
    (numpy scalars, integers beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


def _fields(value: object) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.__dict__
    raise TypeError(f"{type(value).__name__} is not a message")


def _json(message: BaseModel, tensors: list[dict[str, Any]]) -> bytes:
    try:
        return orjson.dumps({"tensors": tensors, "message": message}, default=_fields)
    except TypeError:  # e.g. an integer beyond 64 bits: pydantic writes what it validated
        dumped = message.model_dump(mode="json")
        return json.dumps({"tensors": tensors, "message": dumped}).encode()


def encode_message(message: BaseModel, arrays: Sequence[np.ndarray]) -> bytes:
    """One frame holding ``message`` and the bytes of ``arrays``."""
    contiguous = [np.ascontiguousarray(a) for a in arrays]
    head = _json(message, [tensor_header(a) for a in contiguous])
    parts: list[Any] = [header_frame(head)]
    parts.extend(contiguous)  # joined straight from the arrays' buffers: one copy
    return b"".join(parts)


def _tensor(spec: Any) -> tuple[np.dtype, list[int]]:
    """The dtype and shape of a tensor header, checked."""
    try:
        dtype, shape = _ALLOWED_DTYPES.get(spec["dtype"]), spec["shape"]
        if len(spec) != len(_TENSOR_KEYS) or type(shape) is not list or min(shape, default=0) < 0:
            raise TypeError
    except (TypeError, KeyError):  # not a dict, unhashable dtype, other keys, bad dims
        raise RuntimeLayerError(f"a malformed tensor header on the wire: {spec!r}") from None
    if dtype is None:
        raise RuntimeLayerError(f"unexpected dtype {spec['dtype']!r} on the wire")
    return dtype, shape


def _header(frame: Frame, adapter: TypeAdapter[Message]) -> tuple[Message, Any, int]:
    """The frame's message (validated), its tensor headers and where its tensors start."""
    if len(frame) < _LENGTH_BYTES:
        raise RuntimeLayerError(f"a frame of {len(frame)} bytes has no header length")
    head_end = _LENGTH_BYTES + int.from_bytes(frame[:_LENGTH_BYTES], "little")
    if head_end > len(frame):
        raise RuntimeLayerError("a frame is shorter than its header length says")
    try:
        header = orjson.loads(memoryview(frame)[_LENGTH_BYTES:head_end])
        if not isinstance(header, dict) or header.keys() != _HEADER_KEYS:
            raise RuntimeLayerError(f"a frame header needs exactly {sorted(_HEADER_KEYS)}")
        message = adapter.validate_python(header["message"])
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise RuntimeLayerError(f"a malformed message on the wire: {exc}") from None
    if not isinstance(header["tensors"], list):
        raise RuntimeLayerError("a frame header's tensors must be a list")
    return message, header["tensors"], head_end


Layout = tuple[Any, tuple[tuple[np.dtype, tuple[int, ...]], ...], int]
"""A frame's message, its tensors' checked dtypes and shapes, and where its tensors start."""


def _layout(frame: Frame, adapter: TypeAdapter[Message]) -> Layout:
    message, tensors, offset = _header(frame, adapter)
    return message, tuple((dtype, tuple(shape)) for dtype, shape in map(_tensor, tensors)), offset


class HeaderMemo:
    """The layouts of the request headers a worker has read, by their exact bytes: the pool
    sends a method's stateless call with the same header every time (same message, same
    tensor shapes), and parsing and validating it again cost 2.5 us of the worker's ~20 us
    of Python per call. Only messages of ``kinds`` are kept (immutable, all scalar fields),
    headers up to ``MAX_BYTES``, ``MAX_ENTRIES`` of them (then it starts afresh)."""

    MAX_BYTES, MAX_ENTRIES = 4096, 256

    def __init__(self, kinds: tuple[type, ...]) -> None:
        self.kinds = kinds
        self.layouts: dict[bytes, Layout] = {}

    def layout(self, frame: Frame, adapter: TypeAdapter[Message]) -> Layout:
        """``frame``'s layout, parsed and checked once per distinct header."""
        head_end = _LENGTH_BYTES + int.from_bytes(frame[:_LENGTH_BYTES], "little")
        if head_end > self.MAX_BYTES or head_end > len(frame):
            return _layout(frame, adapter)
        key = bytes(frame[:head_end])
        found = self.layouts.get(key)
        if found is None:
            found = _layout(frame, adapter)
            if isinstance(found[0], self.kinds):
                if len(self.layouts) >= self.MAX_ENTRIES:
                    self.layouts.clear()
                self.layouts[key] = found
        return found


def decode_message(
    frame: Frame, adapter: TypeAdapter[Message], memo: HeaderMemo | None = None
) -> tuple[Message, list[np.ndarray]]:
    """Split a frame made by ``encode_message`` into its message, validated by ``adapter``,
    and its arrays (views into ``frame``); ``RuntimeLayerError`` if it is malformed. With
    ``memo``, a header read before is not parsed again."""
    message, tensors, offset = (memo.layout if memo else _layout)(frame, adapter)
    arrays = []
    for dtype, shape in tensors:
        count = math.prod(shape)
        if offset + count * dtype.itemsize > len(frame):
            raise RuntimeLayerError("a tensor frame is shorter than its header says")
        arrays.append(np.frombuffer(frame, dtype, count, offset).reshape(shape))
        offset += count * dtype.itemsize
    if offset != len(frame):
        raise RuntimeLayerError(f"{len(frame) - offset} stray bytes after the tensors")
    return message, arrays


def header_frame(head: bytes) -> bytes:
    """The frame of a message without tensors whose JSON header is ``head`` (its length,
    then it; a message's tensors follow it)."""
    return len(head).to_bytes(_LENGTH_BYTES, "little") + head


def send_message(conn: Connection, message: BaseModel, arrays: Sequence[np.ndarray]) -> None:
    """Send ``message`` and ``arrays`` as one frame."""
    send_frame(conn, encode_message(message, arrays))


def send_frame(conn: Connection, frame: bytes) -> None:
    """Write ``frame`` as ``conn.send_bytes`` does (multiprocessing's length first: what
    ``read_frame`` and ``recv_bytes`` read), a small one in one ``os.write`` without its
    checks, ~1 us less (a generation writes a frame a token)."""
    if len(frame) > _ONE_WRITE:
        conn.send_bytes(frame)
        return
    fd = conn.fileno()
    view = memoryview(_SIZE.pack(len(frame)) + frame)
    while view:
        view = view[os.write(fd, view) :]


def read_frame(conn: Connection) -> bytes | bytearray:
    """The next message ``conn.send_bytes`` wrote on the other end, as ``conn.recv_bytes()``
    would answer it, but with fewer copies: a large one is read straight into one buffer
    (``recv_bytes`` copies it through a ``BytesIO`` twice), a small one with two reads.
    ``EOFError`` if the other end closed before the message began, ``OSError`` inside it."""
    fd = conn.fileno()
    (size,) = _SIZE.unpack(_read(fd, _SIZE.size, at_start=True))
    if size == -1:  # multiprocessing's header of a message over 2 GiB
        (size,) = _LONG_SIZE.unpack(_read(fd, _LONG_SIZE.size))
    return _read(fd, size) if size <= _SMALL_FRAME else _read_into(fd, bytearray(size))


def _read(fd: int, size: int, at_start: bool = False) -> bytes | bytearray:
    data = os.read(fd, size) if size else b""
    if len(data) == size:
        return data
    if not data:
        raise EOFError if at_start else OSError("got end of file during message")
    buffer = bytearray(size)
    buffer[: len(data)] = data
    return _read_into(buffer=buffer, fd=fd, done=len(data))


def _read_into(fd: int, buffer: bytearray, done: int = 0) -> bytearray:
    view = memoryview(buffer)
    while done < len(buffer):
        count = os.readv(fd, [view[done:]])
        if count == 0:
            raise OSError("got end of file during message")
        done += count
    return buffer


def recv_request(
    conn: Connection, memo: HeaderMemo | None = None
) -> tuple[WorkerRequest, list[np.ndarray]]:
    """Receive a request, in a worker; its arrays are writable (views of a fresh buffer).
    With ``memo``, a header it holds is not parsed again (the worker's, for infer requests).

    Raises ``EOFError`` if the pool went away, ``RuntimeLayerError`` if the frame is
    malformed (the connection stays usable: the next frame starts afresh).
    """
    frame = read_frame(conn)
    writable = frame if isinstance(frame, bytearray) else bytearray(frame)
    return decode_message(writable, WORKER_REQUEST, memo)


def recv_reply(conn: Connection) -> tuple[WorkerReply, list[np.ndarray]]:
    """Receive a worker's message, in the pool; its arrays are read-only views.

    Raises ``EOFError`` if the worker died, ``RuntimeLayerError`` if the frame is malformed.
    """
    frame = read_frame(conn)
    if isinstance(frame, bytearray):
        return decode_message(memoryview(frame).toreadonly(), WORKER_REPLY)
    return decode_message(frame, WORKER_REPLY)


_TOKEN_EVENT = (
    b'{"tensors":[],"message":{"kind":"generated","event":{"text":',
    b',"token_ids":[',
    b'],"finish_reason":null,"usage":null,"logprobs":null,"prompt_tokens":',
    b"}}}",
)


def token_frame(text: str, token: int, prompt_tokens: int | None = None) -> bytes:
    """The frame of ``GeneratedReply(event=GenerationEvent(text=text, token_ids=(token,),
    prompt_tokens=prompt_tokens))`` byte for byte as ``encode_message`` writes it (a test
    holds them equal), without building the two models and walking them (~2.5 us of a
    token's ~20 us of Python)."""
    start, ids, prompt, end = _TOKEN_EVENT
    told = b"null" if prompt_tokens is None else b"%d" % prompt_tokens
    parts = (start, orjson.dumps(text), ids, b"%d" % token, prompt, told, end)
    return header_frame(b"".join(parts))
