"""gRPC request layouts remembered (``RequestPlans``): a later request is decoded as the full
decode would decode it, and anything the plan does not fit is decoded, and refused, in
full."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb

from pteforge.runtime import InvalidInputError
from pteforge.runtime.errors import ProtocolError
from pteforge.runtime.metadata import MethodSignature, TensorSpec
from pteforge.server.grpc_api.codec import decode_request
from pteforge.server.grpc_api.plans import RequestPlans

SIG = MethodSignature(
    "decode",
    (TensorSpec("tokens", "int64", (1, 2)), TensorSpec("memory", "float32", (2,))),
    (TensorSpec("logits", "float32", (2,)), TensorSpec("state", "float32", (2,))),
)


def _request(value: int, request_id: str = "") -> pb.ModelInferRequest:
    """Inputs listed out of the signature's order (memory first), one output asked for."""
    request = pb.ModelInferRequest(model_name="a.decode", id=request_id)
    request.inputs.add(name="memory", datatype="FP32", shape=[2])
    request.inputs.add(name="tokens", datatype="INT64", shape=[1, 2])
    request.raw_input_contents.append(np.full(2, value / 2, dtype=np.float32).tobytes())
    request.raw_input_contents.append(np.full((1, 2), value, dtype=np.int64).tobytes())
    request.outputs.add(name="state")
    return request


def test_a_remembered_layout_decodes_each_request_as_the_full_decode_does() -> None:
    plans = RequestPlans()
    for value, request_id in ((1, "r1"), (2, ""), (3, "r3")):
        got = plans.decode(_request(value, request_id), SIG)
        full = decode_request(_request(value, request_id), SIG)
        assert (got.id, got.outputs, got.parameters) == (full.id, full.outputs, full.parameters)
        for mine, theirs in zip(got.inputs, full.inputs, strict=True):
            assert (mine.dtype, mine.shape) == (theirs.dtype, theirs.shape)
            np.testing.assert_array_equal(mine, theirs)
        assert got.inputs[0][0, 0] == value
    got.outputs.clear()  # each request has its own list
    assert [o.name for o in plans.decode(_request(4), SIG).outputs] == ["state"]


def test_what_the_plan_does_not_fit_is_refused_by_the_full_decode() -> None:
    plans = RequestPlans()
    plans.decode(_request(1), SIG)
    short = _request(1)
    short.raw_input_contents[0] = b"\0" * 4
    with pytest.raises(InvalidInputError, match="'memory': raw contents are 4 bytes"):
        plans.decode(short, SIG)
    reshaped = _request(1)
    reshaped.inputs[0].shape[:] = [3]
    with pytest.raises(InvalidInputError, match="'memory': expected shape"):
        plans.decode(reshaped, SIG)


def test_another_signature_or_parameters_are_not_served_from_a_plan() -> None:
    plans = RequestPlans()
    plans.decode(_request(1), SIG)
    other = MethodSignature("decode", SIG.inputs[::-1], SIG.outputs)  # same names, new object
    assert plans.decode(_request(2), other).inputs[0].dtype == np.float32
    stepped = _request(2)
    stepped.parameters["sequence_id"].int64_param = 9
    assert plans.decode(stepped, SIG).parameters == {"sequence_id": 9}


def test_a_description_carrying_what_the_decode_refuses_is_not_kept() -> None:
    """Typed contents sent beside raw ones are refused (a tensor sent twice); the plans keep
    nothing of such a request: a plan keyed on its description would keep 4 MB per request
    layout beyond the request."""
    plans = RequestPlans()
    padded = _request(1)
    padded.inputs[0].contents.fp32_contents.extend(np.zeros(1 << 20, dtype=np.float32))
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="both raw_input_contents and contents"):
            plans.decode(padded, SIG)
        del padded
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 1 << 20
