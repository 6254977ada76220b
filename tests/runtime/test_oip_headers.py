"""Binary /v2 headers remembered (``HeaderPlans``): a later body is cut as the full decode
would cut it, and anything the plan does not fit is decoded, and refused, in full."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pteforge.runtime import InvalidInputError
from pteforge.runtime.metadata import MethodSignature, TensorSpec
from pteforge.runtime.oip_codec import ProtocolError, decode_infer_request
from pteforge.runtime.oip_headers import HeaderPlans

SIG = MethodSignature(
    "decode",
    (TensorSpec("input_0", "int64", (1, 4)), TensorSpec("input_1", "float32", (1, 2))),
    (TensorSpec("output_0", "float32", (2,)),),
)
# The header lists input_1 first: its bytes come first in the binary section.
HEAD = json.dumps(
    {
        "id": "r1",
        "inputs": [
            {"name": "input_1", "datatype": "FP32", "shape": [1, 2],
             "parameters": {"binary_data_size": 8}},
            {"name": "input_0", "datatype": "INT64", "shape": [1, 4],
             "parameters": {"binary_data_size": 32}},
        ],
        "outputs": [{"name": "output_0", "parameters": {"binary_data": True}}],
        "parameters": {"binary_data_output": True},
    }
).encode()  # fmt: skip


def _body(value: int) -> bytes:
    memory = np.full((1, 2), value / 2, dtype=np.float32)
    return HEAD + memory.tobytes() + np.full((1, 4), value, dtype=np.int64).tobytes()


def test_a_remembered_header_cuts_each_body_as_the_full_decode_does() -> None:
    plans = HeaderPlans()
    for value in (1, 2, 3):
        got = plans.decode(_body(value), len(HEAD), SIG)
        full = decode_infer_request(_body(value), len(HEAD), SIG)
        assert (got.id, got.outputs, got.parameters) == (full.id, full.outputs, full.parameters)
        for mine, theirs in zip(got.inputs, full.inputs, strict=True):
            assert (mine.dtype, mine.shape) == (theirs.dtype, theirs.shape)
            np.testing.assert_array_equal(mine, theirs)
        assert got.inputs[0][0, 0] == value
    got.parameters["changed"] = True  # each request has its own parameters
    assert "changed" not in plans.decode(_body(4), len(HEAD), SIG).parameters


def test_what_the_plan_does_not_fit_is_refused_by_the_full_decode() -> None:
    plans = HeaderPlans()
    plans.decode(_body(1), len(HEAD), SIG)
    with pytest.raises(ProtocolError, match="binary section ends"):
        plans.decode(_body(1)[:-4], len(HEAD), SIG)
    with pytest.raises(ProtocolError, match="no input claims"):
        plans.decode(_body(1) + b"1234", len(HEAD), SIG)
    other = MethodSignature(
        "decode",
        (TensorSpec("input_0", "int64", (1, 4)), TensorSpec("input_1", "float32", (2, 1))),
        SIG.outputs,
    )
    with pytest.raises(InvalidInputError, match="expected shape"):  # its own signature
        plans.decode(_body(1), len(HEAD), other)
