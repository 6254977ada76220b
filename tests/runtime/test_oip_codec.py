"""The OIP codec on its own: JSON and binary bodies, and errors naming the input."""

from __future__ import annotations

import json
import re

import ml_dtypes
import numpy as np
import orjson
import pytest
from tritonclient.http import InferResult

from pteforge.runtime import InvalidInputError
from pteforge.runtime.metadata import MethodSignature, TensorSpec
from pteforge.runtime.oip_codec import (
    ProtocolError,
    decode_infer_request,
    encode_infer_response,
    split_model_name,
)

TOKENS = {"name": "input_0", "datatype": "INT64", "shape": [1, 4], "data": [1, 2, 3, 4]}
MEMORY = {"name": "input_1", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]}


def _with(base: dict[str, object], **changes: object) -> dict[str, object]:
    return {**base, **changes}


SIG = MethodSignature(
    "decode",
    (TensorSpec("input_0", "int64", (1, 4)), TensorSpec("input_1", "float32", (1, 2))),
    (TensorSpec("output_0", "float32", (2,)),),
)


def _tensor(name: str, datatype: str, shape: list[int], data: list[float]) -> dict[str, object]:
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def _body(*tensors: dict[str, object], **extra: object) -> bytes:
    return json.dumps({"inputs": list(tensors), **extra}).encode()


def test_json_inputs_are_ordered_by_signature_not_by_request() -> None:
    body = _body(
        _tensor("input_1", "FP32", [1, 2], [0.5, 1.5]),
        _tensor("input_0", "INT64", [1, 4], [[1, 2, 3, 4]]),
    )
    request = decode_infer_request(body, None, SIG)
    np.testing.assert_array_equal(request.inputs[0], np.array([[1, 2, 3, 4]], dtype=np.int64))
    np.testing.assert_array_equal(request.inputs[1], np.array([[0.5, 1.5]], dtype=np.float32))


def test_binary_inputs_follow_the_json_header() -> None:
    tokens = np.arange(4, dtype=np.int64).reshape(1, 4)
    memory = np.array([[2.0, 3.0]], dtype=np.float32)
    head = _body(
        {"name": "input_0", "datatype": "INT64", "shape": [1, 4],
         "parameters": {"binary_data_size": tokens.nbytes}},
        {"name": "input_1", "datatype": "FP32", "shape": [1, 2],
         "parameters": {"binary_data_size": memory.nbytes}},
    )  # fmt: skip
    request = decode_infer_request(head + tokens.tobytes() + memory.tobytes(), len(head), SIG)
    np.testing.assert_array_equal(request.inputs[0], tokens)
    np.testing.assert_array_equal(request.inputs[1], memory)


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        ([TOKENS], "expects 2 input(s) (input_0, input_1), got 1"),
        ([_with(TOKENS, datatype="FP32"), MEMORY], "input 'input_0': expected datatype INT64"),
        (
            [TOKENS, _with(MEMORY, shape=[2, 1])],
            "input 'input_1': expected shape [1, 2], got [2, 1]",
        ),
        ([_with(TOKENS, data=[1, 2, 3]), MEMORY], "input 'input_0': shape [1, 4] needs 4 elements"),
        ([_with(TOKENS, name="tokens"), MEMORY], "unknown input 'tokens'"),
        ([_with(TOKENS, data=["a"] * 4), MEMORY], "input 'input_0': data is not int64"),
        ([_with(TOKENS, data=[1, 2, 3.7, 4]), MEMORY], "data is not int64: it holds numbers"),
        ([_with(TOKENS, data=[True] * 4), MEMORY], "data is not int64: it holds true/false"),
        ([_with(TOKENS, data=[[1, 2], [True, 4]]), MEMORY], "not int64: it holds true/false"),
        ([TOKENS, _with(MEMORY, data=[0.5, False])], "data is not float32: it holds true/false"),
        ([TOKENS, _with(MEMORY, data=[0.5, None])], "data is not float32: it holds null"),
        # an integer the dtype cannot hold wrapped (attack pass): 2**64-1 was -1, 2**63 -2**63
        (
            [_with(TOKENS, data=[2**64 - 1] * 4), MEMORY],
            "data is not int64: it holds 18446744073709551615, outside int64's [",
        ),
        ([_with(TOKENS, data=[2**63] * 4), MEMORY], "it holds 9223372036854775808, outside"),
        ([_with(TOKENS, data=[2**64 + 1, 2, 3, 4]), MEMORY], "(or integers past int64's range"),
    ],
)
def test_mismatches_name_the_input(tensors: list[dict[str, object]], message: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        decode_infer_request(_body(*tensors), None, SIG)
    assert message in str(err.value)


def test_an_integer_its_dtype_cannot_hold_is_refused_not_wrapped() -> None:
    """JSON data (and gRPC's typed int_contents, decoded alike) was cast with wraparound:
    300 as INT8 became 44, -1 as UINT8 255 (attack pass, item 2)."""
    for datatype, dtype, value, shown in (
        ("INT8", "int8", 300, "it holds 300, outside int8's [-128, 127]"),
        ("UINT8", "uint8", -1, "it holds -1, outside uint8's [0, 255]"),
        ("INT32", "int32", 2**31, "it holds 2147483648, outside int32's"),
    ):
        signature = MethodSignature("f", (TensorSpec("x", dtype, (2,)),), SIG.outputs)
        body = _body(_tensor("x", datatype, [2], [0, value]))
        with pytest.raises(
            InvalidInputError, match=re.escape(f"input 'x': data is not {dtype}: {shown}")
        ):
            decode_infer_request(body, None, signature)
        edges = np.iinfo(dtype)
        fits = decode_infer_request(
            _body(_tensor("x", datatype, [2], [int(edges.min), int(edges.max)])), None, signature
        )
        assert fits.inputs[0].tolist() == [edges.min, edges.max]


def test_malformed_bodies_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError, match="invalid"):
        decode_infer_request(b"{not json", None, SIG)
    with pytest.raises(ProtocolError, match="Inference-Header-Content-Length") as stale:
        decode_infer_request(b"{}", 10, SIG)  # tritonclient.http's reused headers dict
    assert str(stale.value).endswith("pass a new dict to each call)")
    # a binary call's length left for a JSON call with more bytes: the cut is not JSON
    cut = b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}]}'
    with pytest.raises(ProtocolError, match=r"^the request JSON is invalid: ") as short:
        decode_infer_request(cut, 20, SIG)
    assert f"(cut at Inference-Header-Content-Length 20 of {len(cut)} bytes: left" in str(
        short.value
    ) and str(short.value).endswith("pass a new dict to each call)")
    for header_length in (None, 0):  # curl -X POST without -d: 'is 0 but the body has 0 bytes'
        with pytest.raises(ProtocolError, match=r"^the request has no body: send a JSON object"):
            decode_infer_request(b"", header_length, SIG)
    binary_true = {**TOKENS, "parameters": {"binary_data_size": True}}  # JSON's true is no 1
    with pytest.raises(ProtocolError, match="binary_data_size must be a non-negative integer"):
        head = _body(binary_true, MEMORY)
        decode_infer_request(head + b"\x00" * 8, len(head), SIG)
    with pytest.raises(ProtocolError, match="nested too deeply"):  # was a RecursionError: 500
        decode_infer_request(b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", None, SIG)
    head = _body(
        {"name": "input_0", "datatype": "INT64", "shape": [1, 4],
         "parameters": {"binary_data_size": 32}},
        _tensor("input_1", "FP32", [1, 2], [1, 2]),
    )  # fmt: skip
    with pytest.raises(ProtocolError, match="binary section ends"):
        decode_infer_request(head + b"\0" * 8, len(head), SIG)
    both = _with(TOKENS, parameters={"binary_data_size": 32})  # data was ignored
    head = _body(both, MEMORY)
    with pytest.raises(ProtocolError, match="'input_0': both 'data' and binary_data_size"):
        decode_infer_request(head + b"\0" * 32, len(head), SIG)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_body(_with(TOKENS, parameters=[1]), MEMORY),
         "input 'input_0': 'parameters' must be an object, got [1]"),
        (_body(TOKENS, MEMORY, parameters=[1, 2]),
         "the request: 'parameters' must be an object, got [1, 2]"),
        (_body(TOKENS, MEMORY, outputs=[{"name": "output_0", "parameters": 5}]),
         "output 'output_0': 'parameters' must be an object, got 5"),
        (_body(TOKENS, MEMORY, outputs=[{"name": "output_0", "parameters": {
            "binary_data": "false"}}]),  # a non-empty string was true: a binary answer
         "parameter 'binary_data' must be true or false, got 'false'"),
        (_body(TOKENS, MEMORY, parameters={"binary_data_output": 0}),
         "parameter 'binary_data_output' must be true or false, got 0"),
        (_body(_with(TOKENS, parameters={"shared_memory_region": "r"}), MEMORY),
         "input 'input_0': 'shared_memory_region': shared memory is not supported"),
        (_body(TOKENS, MEMORY, outputs=[
            {"name": "output_0", "parameters": {"shared_memory_region": "o"}}]),
         "output 'output_0': 'shared_memory_region': shared memory is not supported"),
    ],
)  # fmt: skip
def test_parameters_that_are_not_an_object_or_name_shared_memory_are_refused(
    body: bytes, message: str
) -> None:
    """They were a 500 (AttributeError), and a shared-memory output came back in the body
    while the client read its region (attack pass)."""
    with pytest.raises(ProtocolError) as refused:
        decode_infer_request(body, None, SIG)
    assert str(refused.value).startswith(message)


def test_an_output_asked_for_twice_is_refused() -> None:
    """Each output asked for is sent: one output named 300 times in a 17 KB request was a
    300 MiB answer (a 1 MiB output), past what the memory ledger counts (attack pass)."""
    twice = [{"name": "output_0"}, {"name": "output_0", "parameters": {"binary_data": True}}]
    with pytest.raises(InvalidInputError, match="output 'output_0' is asked for more than once"):
        decode_infer_request(_body(TOKENS, MEMORY, outputs=twice), None, SIG)
    with pytest.raises(ProtocolError, match="'outputs' must be a list"):
        decode_infer_request(_body(TOKENS, MEMORY, outputs="output_0"), None, SIG)


def test_response_mixes_json_and_binary_outputs() -> None:
    request = decode_infer_request(
        _body(
            _tensor("input_0", "INT64", [1, 4], [1, 2, 3, 4]),
            _tensor("input_1", "FP32", [1, 2], [1, 2]),
            id="r1",
            parameters={"binary_data_output": True},
        ),
        None,
        SIG,
    )
    out = np.array([1.0, 2.0], dtype=np.float32)
    body, json_length = encode_infer_response("a.decode", request, SIG, [out], {"x": 1})
    assert json_length is not None
    head = json.loads(body[:json_length])
    assert head["id"] == "r1"
    assert head["outputs"][0]["parameters"] == {"binary_data_size": 8}
    np.testing.assert_array_equal(np.frombuffer(body[json_length:], np.float32), out)


def test_non_finite_json_outputs_stay_valid_json() -> None:
    """NaN and infinities are strings in JSON data (binary data untouched): a strict parser
    reads the body, and tritonclient's ``as_numpy`` gets the same floats back; a non-finite
    input given the same way decodes too."""
    request = decode_infer_request(
        _body(
            _tensor("input_0", "INT64", [1, 4], [1, 2, 3, 4]),
            _tensor("input_1", "FP32", [1, 2], ["NaN", "-Infinity"]),  # type: ignore[list-item]
        ),
        None,
        SIG,
    )
    assert np.isnan(request.inputs[1][0, 0]) and request.inputs[1][0, 1] == -np.inf
    out = np.array([np.nan, np.inf, -np.inf, 1.5], dtype=np.float32)
    body, json_length = encode_infer_response("a.decode", request, SIG, [out], {})
    assert json_length is None
    data = orjson.loads(body)["outputs"][0]["data"]  # orjson refuses NaN literals
    assert data == ["NaN", "Infinity", "-Infinity", 1.5]
    decoded = InferResult.from_response_body(body).as_numpy("output_0")  # tritonclient's own
    np.testing.assert_array_equal(decoded, out)


BF16_SIG = MethodSignature(
    "forward", (TensorSpec("x", "bfloat16", (2, 2)),), (TensorSpec("y", "bfloat16", (3,)),)
)


def test_bf16_inputs_keep_their_bits_and_outputs_go_back_as_bf16() -> None:
    """BF16 is 2 bytes an element, binary or JSON numbers (rounded to nearest), held in
    ml_dtypes' bfloat16 as tritonclient holds it; a wrong-size binary input is refused."""
    values = np.array([[1.0, -2.5], [3.140625, 1e-3]], dtype=ml_dtypes.bfloat16)
    head = _body({"name": "x", "datatype": "BF16", "shape": [2, 2],
                  "parameters": {"binary_data_size": 8}})  # fmt: skip
    binary = decode_infer_request(head + values.tobytes(), len(head), BF16_SIG)
    assert binary.inputs[0].tobytes() == values.tobytes()
    listed = decode_infer_request(
        _body(_tensor("x", "BF16", [2, 2], [1.0, -2.5, 3.14159, 0.001])), None, BF16_SIG
    )
    assert listed.inputs[0].tobytes() == values.tobytes()
    with pytest.raises(InvalidInputError, match="'x': binary_data_size is 6, shape"):
        decode_infer_request(head.replace(b": 8", b": 6") + b"\0" * 6, len(head), BF16_SIG)
    out = np.array([0.5, np.nan, -4.0], dtype=ml_dtypes.bfloat16)
    body, json_length = encode_infer_response("a", listed, BF16_SIG, [out], {})
    assert json_length is None and orjson.loads(body)["outputs"][0]["data"] == [0.5, "NaN", -4.0]
    listed.outputs[0].binary = True
    body, json_length = encode_infer_response("a", listed, BF16_SIG, [out], {})
    result = InferResult.from_response_body(body, header_length=json_length)  # tritonclient's
    assert result.get_output("y")["datatype"] == "BF16"
    assert result.as_numpy("y").tobytes() == out.tobytes()


def test_model_names() -> None:
    assert split_model_name("abc.decode") == ("abc", "decode")
    assert split_model_name("abc") == ("abc", "forward")
    with pytest.raises(ProtocolError):
        split_model_name("abc.")


def test_a_float_its_dtype_cannot_hold_and_numbers_as_bool_are_refused() -> None:
    """A number past the float dtype's largest became inf, and BOOL data took numbers (2 as
    true) (attack pass, found and left open)."""
    for datatype, dtype, data, shown in (
        ("FP16", "float16", [0.5, 70000.0], "it holds 70000, past float16's largest 65504"),
        ("FP32", "float32", [1e39, 0.0], "it holds 1e+39, past float32's largest"),
        ("BOOL", "bool", [2, 0], "it holds numbers; BOOL takes true/false"),
    ):
        signature = MethodSignature("f", (TensorSpec("x", dtype, (2,)),), SIG.outputs)
        with pytest.raises(InvalidInputError, match=re.escape(f"data is not {dtype}: {shown}")):
            decode_infer_request(_body(_tensor("x", datatype, [2], data)), None, signature)
    signature = MethodSignature("f", (TensorSpec("x", "float16", (2,)),), SIG.outputs)
    taken = decode_infer_request(_body(_tensor("x", "FP16", [2], [-65504, 65504])), None, signature)
    assert taken.inputs[0].tolist() == [-65504.0, 65504.0]
