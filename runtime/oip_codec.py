"""Open Inference Protocol v2 codec: request bodies to typed tensors, outputs to responses.

Handles JSON tensors and the binary tensor data extension (a JSON header of
``Inference-Header-Content-Length`` bytes followed by raw tensor bytes). No HTTP framework
here; errors are ``InvalidInputError``/``ProtocolError`` with messages naming the tensor.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from pteforge.contracts.oip import HEADER_LENGTH, STALE_HEADER_LENGTH, json_values, oip_datatype
from pteforge.runtime.dtypes import listed_as, numpy_dtype
from pteforge.runtime.errors import InvalidInputError, ProtocolError
from pteforge.runtime.metadata import MethodSignature, TensorSpec
from pteforge.runtime.validation import (
    check_input_names,
    check_json_numbers,
    check_output_names,
    check_tensor,
    flag,
    positional_inputs,
    tensor_parameters,
)
from pteforge.runtime.wire import dumps

__all__ = ["HEADER_LENGTH"]  # re-exported for the server's routes
BINARY_EXTENSION = "binary_tensor_data"


@dataclass
class RequestedOutput:
    """An output the client asked for and whether it wants it as binary data."""

    name: str
    binary: bool


@dataclass
class InferRequest:
    """A decoded infer request: positional inputs ready for the method."""

    id: str | None
    inputs: list[np.ndarray]
    outputs: list[RequestedOutput]
    parameters: dict[str, Any] = field(default_factory=dict)


def _split_body(body: bytes, header_length: int | None) -> tuple[dict[str, Any], memoryview]:
    if not body:
        raise ProtocolError('the request has no body: send a JSON object {"inputs": [...]}')
    if header_length is None:
        header_length = len(body)
    if not 0 < header_length <= len(body):
        raise ProtocolError(
            f"{HEADER_LENGTH} is {header_length} but the body has {len(body)} bytes"
            + (f" ({STALE_HEADER_LENGTH})" if header_length > len(body) else "")
        )
    try:
        header = _loads(memoryview(body)[:header_length])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        cut = f" (cut at {HEADER_LENGTH} {header_length} of {len(body)} bytes: "
        stale = f"{cut}{STALE_HEADER_LENGTH})" if header_length < len(body) else ""
        raise ProtocolError(f"the request JSON is invalid: {exc}{stale}") from None
    except RecursionError:  # past orjson's depth limit, Python's json recurses
        raise ProtocolError("the request JSON is invalid: nested too deeply") from None
    if not isinstance(header, dict):
        raise ProtocolError("the request JSON must be an object")
    return header, memoryview(body)[header_length:]


def _loads(data: memoryview) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # NaN/Infinity literals: accepted by Python's json
        return json.loads(bytes(data))


def _shape(shape: object, name: str) -> list[int]:
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ProtocolError(f"input {name!r}: 'shape' must be a list of non-negative integers")
    return shape


def _json_data(entry: dict[str, Any], name: str, dtype: np.dtype, shape: list[int]) -> np.ndarray:
    if "data" not in entry:
        raise ProtocolError(f"input {name!r}: no 'data' and no binary_data_size parameter")
    return _listed_data(entry["data"], name, dtype, shape)


def _listed_data(data: Any, name: str, dtype: np.dtype, shape: list[int]) -> np.ndarray:
    try:
        listed = np.asarray(data)
        check_json_numbers(data, listed, dtype)
        array = listed_as(listed, dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInputError(f"input {name!r}: data is not {dtype.name}: {exc}") from None
    if array.size != math.prod(shape):
        raise InvalidInputError(
            f"input {name!r}: shape {shape} needs {math.prod(shape)} elements, "
            f"data has {array.size}"
        )
    return array.reshape(shape)


def _binary_data(
    name: str, dtype: np.dtype, shape: list[int], size: object, chunk: memoryview
) -> np.ndarray:
    expected = math.prod(shape) * dtype.itemsize
    if size != expected:
        raise InvalidInputError(
            f"input {name!r}: binary_data_size is {size}, shape {shape} of {dtype.name} "
            f"needs {expected} bytes"
        )
    return np.frombuffer(chunk, dtype=dtype).reshape(shape)


class _BinaryCursor:
    """Hands out consecutive slices of the binary section."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.offset = 0

    def take(self, size: int, name: str) -> memoryview:
        if self.offset + size > len(self.data):
            raise ProtocolError(f"input {name!r}: the binary section ends before its data")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk


def _decode_input(entry: Any, spec: TensorSpec, cursor: _BinaryCursor) -> np.ndarray:
    name = spec.name
    datatype = str(entry.get("datatype"))
    shape = _shape(entry.get("shape"), name)
    check_tensor(spec, datatype, shape)
    dtype = numpy_dtype(datatype)
    size = tensor_parameters(entry.get("parameters"), f"input {name!r}").get("binary_data_size")
    if size is None:
        return _json_data(entry, name, dtype, shape)
    if type(size) is not int or size < 0:  # not a bool: JSON's true is no size
        raise ProtocolError(f"input {name!r}: binary_data_size must be a non-negative integer")
    if "data" in entry:
        raise ProtocolError(f"input {name!r}: both 'data' and binary_data_size: send one")
    return _binary_data(name, dtype, shape, size, cursor.take(size, name))


def _input_entries(header: dict[str, Any], signature: MethodSignature) -> list[dict[str, Any]]:
    entries = header.get("inputs")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ProtocolError("the request needs an 'inputs' list of tensor objects")
    check_input_names([str(e.get("name")) for e in entries], signature)
    return entries


def input_tensor(
    signature: MethodSignature,
    name: str,
    datatype: str,
    shape: object,
    data: bytes | Sequence[Any],
) -> np.ndarray:
    """Input ``name`` from its raw bytes or its flat list of values, checked like a /v2
    tensor (datatype, shape, size) against ``signature``; errors name the input."""
    spec = _spec(signature, name)
    shape = _shape(shape, name)
    check_tensor(spec, datatype, shape)
    dtype = numpy_dtype(datatype)
    if not isinstance(data, bytes):
        return _listed_data(data, name, dtype, shape)
    expected = math.prod(shape) * dtype.itemsize
    if len(data) != expected:
        raise InvalidInputError(
            f"input {name!r}: raw contents are {len(data)} bytes, shape {shape} of "
            f"{dtype.name} needs {expected} bytes"
        )
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def _requested_outputs(header: dict[str, Any], signature: MethodSignature) -> list[RequestedOutput]:
    params = tensor_parameters(header.get("parameters"), "the request")
    default_binary = flag(params, "binary_data_output")
    wanted = header.get("outputs")
    if not wanted:
        return [RequestedOutput(spec.name, default_binary) for spec in signature.outputs]
    if not isinstance(wanted, list):
        raise ProtocolError("'outputs' must be a list of output objects")
    names = [str(entry.get("name")) if isinstance(entry, dict) else str(entry) for entry in wanted]
    check_output_names(names, signature)
    requested = []
    for name, entry in zip(names, wanted, strict=True):
        out_params = tensor_parameters(
            entry.get("parameters") if isinstance(entry, dict) else None, f"output {name!r}"
        )
        requested.append(RequestedOutput(name, flag(out_params, "binary_data", default_binary)))
    return requested


def decode_infer_request(
    body: bytes, header_length: int | None, signature: MethodSignature
) -> InferRequest:
    """Parse an infer request body into positional inputs validated against ``signature``.

    ``header_length`` is the ``Inference-Header-Content-Length`` value, or ``None`` for a
    pure JSON body.
    """
    header, binary = _split_body(body, header_length)
    entries = {str(e.get("name")): e for e in _input_entries(header, signature)}
    cursor = _BinaryCursor(binary)
    by_order = [str(e.get("name")) for e in header["inputs"]]
    decoded = {
        name: _decode_input(entries[name], _spec(signature, name), cursor) for name in by_order
    }
    if cursor.offset != len(binary):
        raise ProtocolError(
            f"the binary section has {len(binary) - cursor.offset} bytes no input claims"
        )
    return InferRequest(
        id=str(header["id"]) if header.get("id") is not None else None,
        inputs=positional_inputs(signature, decoded),
        outputs=_requested_outputs(header, signature),
        parameters=tensor_parameters(header.get("parameters"), "the request"),
    )


def _spec(signature: MethodSignature, name: str) -> TensorSpec:
    return next(spec for spec in signature.inputs if spec.name == name)


def encode_infer_response(
    model_name: str,
    request: InferRequest,
    signature: MethodSignature,
    outputs: list[np.ndarray],
    parameters: dict[str, Any],
    model_version: str = "1",
) -> tuple[bytes, int | None]:
    """Build the response body; the second item is the JSON length if binary data follows.
    ``model_version``: the version that answered (a model name's), ``"1"`` for an artifact."""
    tensors: list[dict[str, Any]] = []
    chunks: list[Any] = []  # arrays, joined into the body from their buffers
    for wanted, array in requested_outputs(request, signature, outputs):
        datatype, shape = oip_datatype(array.dtype), list(array.shape)
        tensor: dict[str, Any] = {"name": wanted.name, "datatype": datatype, "shape": shape}
        if wanted.binary:
            chunks.append(array)
            tensor["parameters"] = {"binary_data_size": array.nbytes}
        else:
            tensor["data"] = json_values(array)
        tensors.append(tensor)
    response: dict[str, Any] = {"model_name": model_name, "model_version": model_version}
    if request.id is not None:
        response["id"] = request.id
    response["parameters"] = parameters
    response["outputs"] = tensors
    head = dumps(response)
    if not chunks:
        return head, None
    return b"".join([head, *chunks]), len(head)  # one copy, straight from the arrays


def requested_outputs(
    request: InferRequest, signature: MethodSignature, outputs: list[np.ndarray]
) -> Iterator[tuple[RequestedOutput, np.ndarray]]:
    """The outputs ``request`` asks for, in its order, each with its C-contiguous array."""
    by_name = {spec.name: array for spec, array in zip(signature.outputs, outputs, strict=False)}
    for wanted in request.outputs:
        yield wanted, np.ascontiguousarray(by_name[wanted.name])


def model_metadata(
    model_name: str, signature: MethodSignature, version: int | None = None
) -> dict[str, Any]:
    """The OIP model metadata object of one method; ``versions`` names the model version
    that answers (an artifact id has none: "1")."""
    return {
        "name": model_name,
        "versions": [str(version or 1)],
        "platform": "executorch",
        "inputs": [spec.oip_json() for spec in signature.inputs],
        "outputs": [spec.oip_json() for spec in signature.outputs],
    }


def split_model_name(model: str) -> tuple[str, str]:
    """``"{artifact_id}.{method}"`` -> (artifact_id, method); no dot means ``forward``."""
    artifact_id, dot, method = model.rpartition(".")
    if not dot:
        return model, "forward"
    if not artifact_id or not method:
        raise ProtocolError(f"model name {model!r} is not '{{artifact_id}}.{{method}}'")
    return artifact_id, method
