"""Open Inference Protocol gRPC messages to and from the codec's types.

The messages are the ones ``tritonclient`` ships (``tritonclient.grpc.service_pb2``);
tensors are checked by the same helpers as /v2's JSON and binary bodies
(``pteforge.runtime.oip_codec``), so both protocols refuse the same inputs the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from tritonclient.grpc import service_pb2 as pb

from pteforge.contracts.oip import oip_datatype
from pteforge.runtime.errors import InvalidInputError, ProtocolError
from pteforge.runtime.metadata import MethodSignature
from pteforge.runtime.oip_codec import (
    InferRequest,
    RequestedOutput,
    input_tensor,
    requested_outputs,
)
from pteforge.runtime.validation import (
    check_input_names,
    check_output_names,
    positional_inputs,
    tensor_parameters,
)

# Which typed ``InferTensorContents`` field carries each datatype (FP16/BF16: raw only).
CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
}


def parameters_of(parameters: Any) -> dict[str, Any]:
    """A protobuf ``map<string, InferParameter>`` as a dict of Python values."""
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        choice = value.WhichOneof("parameter_choice")
        out[key] = None if choice is None else getattr(value, choice)
    return out


def _set_parameter(target: Any, value: Any) -> None:
    if isinstance(value, bool):
        target.bool_param = value
    elif isinstance(value, int):
        target.int64_param = value
    elif isinstance(value, float):
        target.double_param = value
    else:
        target.string_param = str(value)


def _contents(tensor: Any) -> Sequence[Any]:
    """The typed contents as protobuf holds them (no Python list: 30M floats would be 1 GB
    of Python objects), as many values as the declared shape needs."""
    field = CONTENTS_FIELD.get(tensor.datatype)
    if field is None or not tensor.HasField("contents"):
        raise ProtocolError(
            f"input {tensor.name!r}: no raw_input_contents and no typed contents for "
            f"{tensor.datatype}"
        )
    values: Sequence[Any] = getattr(tensor.contents, field)
    needed = math.prod(tensor.shape)
    if len(values) != needed:
        raise InvalidInputError(
            f"input {tensor.name!r}: shape {list(tensor.shape)} needs {needed} elements, "
            f"contents has {len(values)}"
        )
    return values


def decode_request(request: Any, signature: MethodSignature) -> InferRequest:
    """A ``ModelInferRequest`` as the codec's ``InferRequest``, checked against
    ``signature``: tensors from ``raw_input_contents`` (one per input, in order) or from
    each input's typed ``contents``."""
    tensors = list(request.inputs)
    check_input_names([t.name for t in tensors], signature)
    for kind, entry in [("input", t) for t in tensors] + [("output", o) for o in request.outputs]:
        tensor_parameters(parameters_of(entry.parameters), f"{kind} {entry.name!r}")
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(tensors):
        raise ProtocolError(f"{len(raw)} raw_input_contents for {len(tensors)} inputs")
    both = [t.name for t in tensors if raw and t.HasField("contents")]
    if both:
        raise ProtocolError(f"input {both[0]!r}: both raw_input_contents and contents: send one")
    decoded = {
        t.name: input_tensor(
            signature, t.name, t.datatype, list(t.shape), raw[i] if raw else _contents(t)
        )
        for i, t in enumerate(tensors)
    }
    check_output_names([wanted.name for wanted in request.outputs], signature)
    names = [o.name for o in request.outputs] or [spec.name for spec in signature.outputs]
    return InferRequest(
        id=request.id or None,
        inputs=positional_inputs(signature, decoded),
        outputs=[RequestedOutput(name, binary=True) for name in names],
        parameters=parameters_of(request.parameters),
    )


def encode_response(
    model: str,
    request: InferRequest,
    signature: MethodSignature,
    outputs: list[np.ndarray],
    parameters: dict[str, Any],
    version: str = "1",
) -> Any:
    """The ``ModelInferResponse`` of ``outputs``: the requested ones, as raw contents;
    ``version`` is the model version that answered (``"1"`` for an artifact)."""
    response = pb.ModelInferResponse(model_name=model, model_version=version, id=request.id or "")
    for key, value in parameters.items():
        _set_parameter(response.parameters[key], value)
    for wanted, array in requested_outputs(request, signature, outputs):
        datatype = oip_datatype(array.dtype)
        response.outputs.add(name=wanted.name, datatype=datatype, shape=list(array.shape))
        response.raw_output_contents.append(array.tobytes())
    return response


def metadata_response(metadata: dict[str, Any]) -> Any:
    """A ``ModelMetadataResponse`` from the /v2 metadata object (``oip_codec.model_metadata``)."""
    tensor = pb.ModelMetadataResponse.TensorMetadata

    def tensors(key: str) -> list[Any]:
        entries = metadata[key]
        return [tensor(name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in entries]

    return pb.ModelMetadataResponse(
        name=metadata["name"],
        versions=metadata["versions"],
        platform=metadata["platform"],
        inputs=tensors("inputs"),
        outputs=tensors("outputs"),
    )
