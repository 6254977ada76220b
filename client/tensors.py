"""Open Inference Protocol v2 on the client side: numpy or torch tensors to an infer request
with the binary tensor data extension, and a response back to numpy arrays. No I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from pteforge.client.errors import InvalidInputError, PteforgeError
from pteforge.client.models import InferResult
from pteforge.contracts.oip import (
    HEADER_LENGTH,
    NUMPY_TO_OIP,
    OIP_TO_NUMPY,
    json_values,
    tensor_numpy,
)

Inputs = Sequence[Any] | Mapping[str, Any]


def to_numpy(value: Any, name: str) -> np.ndarray:
    """A C-contiguous numpy array of ``value`` (a numpy array, a torch tensor or a nested list);
    a bfloat16 tensor's is BF16's dtype, its values as they are."""
    if type(value).__module__.startswith("torch"):
        try:
            value = tensor_numpy(value.detach().cpu().resolve_conj())
        except TypeError as exc:  # e.g. a complex32, which numpy has no dtype for
            raise InvalidInputError(f"input {name!r}: {exc}") from None
    array = np.ascontiguousarray(value)
    if array.dtype not in NUMPY_TO_OIP:
        raise InvalidInputError(
            f"input {name!r}: dtype {array.dtype} has no Open Inference Protocol datatype "
            f"(supported: {', '.join(sorted(str(d) for d in NUMPY_TO_OIP))})"
        )
    return array


def named_inputs(inputs: Inputs, names: Sequence[str] | None) -> dict[str, np.ndarray]:
    """``inputs`` by name: a mapping as given, a sequence matched to ``names`` in order."""
    if isinstance(inputs, Mapping):
        return {str(k): to_numpy(v, str(k)) for k, v in inputs.items()}
    items = list(inputs)
    if names is None or len(items) != len(names):
        listed = f"{len(names)} inputs: {', '.join(names)}" if names is not None else ""
        expected = listed or "its inputs by name"
        raise InvalidInputError(f"got {len(items)} inputs, the method takes {expected}")
    return {name: to_numpy(v, name) for name, v in zip(names, items, strict=True)}


def json_tensors(arrays: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """``arrays`` as Open Inference Protocol JSON tensors (``data``: the flat values, NaN
    and infinities as strings: :func:`~pteforge.contracts.oip.json_values`)."""
    return [
        {
            "name": name,
            "datatype": NUMPY_TO_OIP[array.dtype],
            "shape": list(array.shape),
            "data": json_values(array),
        }
        for name, array in arrays.items()
    ]


def encode_request(
    arrays: Mapping[str, np.ndarray], parameters: Mapping[str, Any] | None = None
) -> tuple[bytes, dict[str, str]]:
    """The body (a JSON header, then every tensor's raw bytes) and its headers; outputs are
    asked for as binary data too."""
    entries = [
        {
            "name": name,
            "datatype": NUMPY_TO_OIP[array.dtype],
            "shape": list(array.shape),
            "parameters": {"binary_data_size": array.nbytes},
        }
        for name, array in arrays.items()
    ]
    header = orjson.dumps(
        {"inputs": entries, "parameters": {"binary_data_output": True, **(parameters or {})}}
    )
    chunks: list[Any] = [header, *arrays.values()]  # joined straight from the arrays' buffers
    body = b"".join(chunks)
    headers = {
        HEADER_LENGTH: str(len(header)),
        "Content-Type": "application/octet-stream",
    }
    return body, headers


def decode_response(body: bytes, headers: Mapping[str, str]) -> InferResult:
    """The model name and version, outputs by name and parameters of an infer response."""
    length = headers.get(HEADER_LENGTH)  # httpx headers: any case
    split = int(length) if length else len(body)
    try:
        header = orjson.loads(memoryview(body)[:split])
    except orjson.JSONDecodeError:  # NaN/Infinity literals: only Python's json reads them
        header = _loads_lenient(body[:split])
    return _decoded(header, body, split)


def _loads_lenient(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PteforgeError(f"the infer response is not valid JSON: {exc}") from None


def _decoded(header: Any, body: bytes, split: int) -> InferResult:
    if not isinstance(header, dict):
        raise PteforgeError("the infer response is not a JSON object")
    outputs: dict[str, np.ndarray] = {}
    offset = split
    for entry in header.get("outputs", []):
        array, offset = _output(entry, body, offset)
        outputs[str(entry["name"])] = array
    parameters = dict(header.get("parameters") or {})
    model, version = str(header.get("model_name", "")), str(header.get("model_version", "1"))
    return InferResult(model, outputs, parameters, version)


def _output(entry: Mapping[str, Any], body: bytes, offset: int) -> tuple[np.ndarray, int]:
    dtype = OIP_TO_NUMPY.get(str(entry.get("datatype")))
    if dtype is None:
        raise PteforgeError(
            f"output {entry.get('name')!r}: unknown datatype {entry.get('datatype')!r}"
        )
    shape = [int(d) for d in entry.get("shape", [])]
    size = (entry.get("parameters") or {}).get("binary_data_size")
    if size is None:
        return np.asarray(entry.get("data", []), dtype=dtype).reshape(shape), offset
    count = int(size) // dtype.itemsize
    array = np.frombuffer(body, dtype=dtype, count=count, offset=offset).reshape(shape)
    return array.copy(), offset + int(size)  # a writable array that owns its memory
