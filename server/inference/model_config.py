"""Triton's model configuration extension: a method's ``ModelConfig``, one construction for
``GET /v2/models/{model}/config`` (its protobuf JSON form) and gRPC's ``ModelConfig``.

pteforge does not batch across requests (``max_batch_size`` 0: ``dims`` are the whole
shape, ``-1`` for a dynamic dimension) and answers every version of a model name
(``/versions/{version}/``), so a model name's policy is ``all``; an artifact id is one
artifact, version ``1``.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from pteforge.contracts.oip import config_data_type
from pteforge.runtime.metadata import MethodSignature, TensorSpec

CONFIG_EXTENSION = "model_configuration"
"""The extension's name in the server metadata's ``extensions``."""
PLATFORM = "executorch"


def _version_policy(version: int | None) -> Any:
    if version is None:  # an artifact id: no versions, answered as "1"
        return mc.ModelVersionPolicy(specific=mc.ModelVersionPolicy.Specific(versions=[1]))
    return mc.ModelVersionPolicy(all=mc.ModelVersionPolicy.All())


def _tensor(message: Any, spec: TensorSpec) -> Any:
    """A ``ModelInput`` or ``ModelOutput`` (``message``) of ``spec``."""
    return message(name=spec.name, data_type=config_data_type(spec.datatype), dims=spec.shape)


def model_config(model: str, signature: MethodSignature, version: int | None = None) -> Any:
    """The ``ModelConfig`` message of one method, as ``model`` names it; ``version`` is the
    model version that answers (``None`` for an artifact id)."""
    return mc.ModelConfig(
        name=model,
        platform=PLATFORM,
        backend=PLATFORM,
        version_policy=_version_policy(version),
        max_batch_size=0,
        input=[_tensor(mc.ModelInput, spec) for spec in signature.inputs],
        output=[_tensor(mc.ModelOutput, spec) for spec in signature.outputs],
    )


def config_json(config: Any) -> dict[str, Any]:
    """``config``'s protobuf JSON form (proto field names, fields at their defaults shown, as
    Triton's ``max_batch_size: 0``), its ``dims`` and ``versions`` numbers, as Triton's are
    (protobuf JSON writes 64-bit integers as strings)."""
    data: dict[str, Any] = json_format.MessageToDict(
        config, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    for tensor in (*data["input"], *data["output"]):
        tensor["dims"] = [int(dim) for dim in tensor["dims"]]
    specific = data["version_policy"].get("specific")
    if specific is not None:
        specific["versions"] = [int(version) for version in specific["versions"]]
    return data
