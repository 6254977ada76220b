"""The shared contracts: the JSON forms the API pins, and refusal of anything else."""

from __future__ import annotations

import json
import math

import pytest
import torch
from pydantic import ValidationError
from tritonclient.grpc import model_config_pb2

from pteforge.contracts.errors import ErrorCode
from pteforge.contracts.jobs import (
    CHILD_MESSAGE,
    CompilePayload,
    ErrorMessage,
    JobError,
    LoweringRequest,
    LoweringResult,
    ResultMessage,
    StageMessage,
)
from pteforge.contracts.oip import config_data_type
from pteforge.contracts.specs import (
    ET_SCALAR_TYPES,
    OIP_DATATYPES,
    DynamicDim,
    MethodSignature,
    TensorSpec,
    oip_datatype,
)

SPEC = MethodSignature(
    "decode",
    (TensorSpec("tokens", "int64", (1, -1), (1, 8)), TensorSpec("memory", "float32", (1, 4))),
    (TensorSpec("logits", "float32", (1, 4)),),
)


def test_v1_json_is_name_dtype_shape() -> None:
    plain = TensorSpec("x", "float32", (2, -1))
    assert json.dumps(plain.to_json()) == '{"name": "x", "dtype": "float32", "shape": [2, -1]}'
    assert MethodSignature.from_json(SPEC.to_json()) == SPEC


def test_v2_json_is_the_oip_form() -> None:
    assert SPEC.inputs[0].oip_json() == {
        "name": "tokens",
        "datatype": "INT64",
        "shape": [1, -1],
        "max_shape": [1, 8],
    }
    assert list(SPEC.inputs[1].oip_json()) == ["name", "datatype", "shape"]


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "f", "inputs": [{"name": "x", "dtype": "f", "shape": "a"}], "outputs": []},
        {"name": "f", "inputs": [{"name": "x", "dtype": "f", "shape": [True]}], "outputs": []},
        {"name": 1, "inputs": [], "outputs": []},
        {"name": "f", "inputs": []},
    ],
)
def test_a_malformed_spec_is_a_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        MethodSignature.from_json(bad)


def test_one_dtype_table_matches_torch_and_oip() -> None:
    for name in ET_SCALAR_TYPES.values():
        assert isinstance(getattr(torch, name), torch.dtype), name
    assert set(OIP_DATATYPES) <= set(ET_SCALAR_TYPES.values())
    assert oip_datatype("bfloat16") == "BF16"
    assert oip_datatype("uint16") == "UNSUPPORTED(27)"
    assert oip_datatype("scalar_type_8") == "UNSUPPORTED(8)"
    assert oip_datatype("int") == "UNSUPPORTED"


def test_each_oip_datatype_has_its_triton_config_type() -> None:
    """Triton's model configuration names each datatype the table has (``TYPE_BF16``)."""
    for datatype in OIP_DATATYPES.values():
        assert model_config_pb2.DataType.Value(config_data_type(datatype)) > 0  # not INVALID
    assert config_data_type("FP32") == "TYPE_FP32"
    assert config_data_type("UNSUPPORTED(27)") == "TYPE_INVALID"


def test_the_compile_payload_refuses_unknown_keys() -> None:
    payload = CompilePayload(program_id="prg_1", plan={"all": {}}, plan_hash="ab")
    assert CompilePayload.model_validate(payload.model_dump(mode="json")) == payload
    with pytest.raises(ValidationError):
        CompilePayload.model_validate({**payload.model_dump(mode="json"), "bogus": 1})


def test_lowering_messages_round_trip_through_json() -> None:
    request = LoweringRequest(program_path="/p", plan={}, output_path="/o")
    assert LoweringRequest.model_validate(json.loads(request.model_dump_json())) == request
    result = LoweringResult(report={"a": [1]}, methods=(SPEC,), numerics={"x": math.inf})
    messages = [
        StageMessage(stage="emit"),
        ResultMessage(result=result),
        ErrorMessage(error=JobError(code=ErrorCode.OUT_OF_MEMORY, message="m")),
    ]
    for message in messages:
        wire = json.dumps(message.model_dump(mode="json"))
        assert CHILD_MESSAGE.validate_python(json.loads(wire)) == message
    with pytest.raises(ValidationError):
        CHILD_MESSAGE.validate_python({"stage": "emit"})


def test_error_codes_are_their_strings() -> None:
    assert ErrorCode.NOT_FOUND == "not_found"
    assert json.dumps({"code": ErrorCode.INVALID_PLAN}) == '{"code": "invalid_plan"}'


def test_pinned_by_takes_only_dimensions_the_stored_signature_knows() -> None:
    """A compiled artifact's stored ``[1, -1]`` pins the ``.pte``'s ``[-1, -1]``; an uploaded
    ``.pte``'s stored shape is its bound ``[1, 64]``, which must stay a bound, not a shape."""
    runtime = MethodSignature(
        "forward", (TensorSpec("ids", "int64", (-1, -1), max_shape=(1, 64)),), ()
    )
    compiled = MethodSignature("forward", (TensorSpec("ids", "int64", (1, -1)),), ())
    uploaded = MethodSignature("forward", (TensorSpec("ids", "int64", (1, 64)),), ())
    assert runtime.pinned_by(compiled).inputs[0].shape == (1, -1)
    assert runtime.pinned_by(uploaded) == runtime
    assert runtime.pinned_by(None) == runtime


def test_pinned_by_takes_the_static_dimensions_of_outputs_too() -> None:
    """A classifier exported with a dynamic batch: the ``.pte`` says its logits are
    ``[-1, -1]`` (up to ``[8, 10]``), and ``/v2`` metadata and Triton's model config showed
    that, as if the number of classes varied; the program's ``[-1, 10]`` is what it is."""
    logits = TensorSpec("logits", "float32", (-1, -1), max_shape=(8, 10))
    pixels = TensorSpec("pixels", "float32", (-1, -1, -1, -1), max_shape=(8, 3, 32, 32))
    runtime = MethodSignature("forward", (pixels,), (logits,))
    batch = (DynamicDim(0, "s0", 1, 8),)
    stored = MethodSignature(
        "forward",
        (TensorSpec("pixels", "float32", (-1, 3, 32, 32), dynamic_dims=batch),),
        (TensorSpec("logits", "float32", (-1, 10), dynamic_dims=batch),),
    )
    (served,) = runtime.pinned_by(stored).outputs
    assert (served.shape, served.max_shape, served.dynamic_dims) == ((-1, 10), (8, 10), batch)
    assert served.oip_json()["shape"] == [-1, 10]
    other = MethodSignature("forward", stored.inputs, (TensorSpec("y", "float32", (-1, 5)),))
    assert runtime.pinned_by(other).outputs == (logits,)  # another tensor: the .pte's word
