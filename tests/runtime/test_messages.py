"""The typed messages between the pool and a worker: both ends parse, nothing loose passes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pteforge.contracts.runtime_messages import (
    WORKER_REQUEST,
    DescribeReply,
    DescribeRequest,
    DropRequest,
    ErrorReply,
    InferReply,
    InferRequest,
    ReadyReply,
)
from pteforge.runtime.errors import RuntimeLayerError
from pteforge.runtime.processes import WorkerProcess, process_context
from pteforge.runtime.wire import HeaderMemo, decode_message, encode_message
from pteforge.runtime.worker import WorkerConfig
from tests.runtime.helpers import Compiled

_LENGTH = 8


def _frame(header: object, tail: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return len(head).to_bytes(_LENGTH, "little") + head + tail


def test_a_request_and_its_tensors_come_back_as_they_were_sent() -> None:
    request = InferRequest(sha256="ab" * 32, path="/a.pte", method="forward", session=3)
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], dtype=np.int64)]
    message, decoded = decode_message(encode_message(request, arrays), WORKER_REQUEST)
    assert message == request
    for sent, got in zip(arrays, decoded, strict=True):
        assert got.dtype == sent.dtype
        np.testing.assert_array_equal(got, sent)


def test_each_request_is_told_apart_by_its_op() -> None:
    for request in (DescribeRequest(sha256="s", path="/p"), DropRequest(drop=(1, 2))):
        message, arrays = decode_message(encode_message(request, []), WORKER_REQUEST)
        assert message == request and arrays == []


@pytest.mark.parametrize(
    ("message", "complaint"),
    [
        ({"op": "describe", "sha256": "s", "path": "/p", "extra": 1}, "extra"),
        ({"op": "explode"}, "explode"),
        ({"op": "infer", "sha256": "s", "path": "/p"}, "method"),
        ({"op": "drop", "drop": ["x"]}, "drop"),
    ],
)
def test_a_request_outside_the_protocol_is_refused(message: object, complaint: str) -> None:
    with pytest.raises(RuntimeLayerError, match=complaint):
        decode_message(_frame({"tensors": [], "message": message}), WORKER_REQUEST)


@pytest.mark.parametrize(
    ("tensors", "tail", "complaint"),
    [
        ([{"dtype": "<f4", "shape": [-1]}], b"", "malformed tensor header"),
        ([{"dtype": "<f4", "shape": [1], "strides": [4]}], b"1234", "malformed tensor header"),
        ([{"dtype": "|O", "shape": [1]}], b"12345678", "unexpected dtype"),
        ([{"dtype": "<f4", "shape": [4]}], b"1234", "shorter than its header"),
        ([], b"stray", "stray bytes"),
    ],
)
def test_tensor_headers_are_checked_against_the_bytes(
    tensors: object, tail: bytes, complaint: str
) -> None:
    header = {"tensors": tensors, "message": {"op": "drop", "drop": []}}
    with pytest.raises(RuntimeLayerError, match=complaint):
        decode_message(_frame(header, tail), WORKER_REQUEST)


def test_a_remembered_header_decodes_each_frame_as_it_was_sent() -> None:
    """``HeaderMemo`` parses a header once, but each frame's own bytes are its tensors and
    its length is still checked; only infer requests are kept."""
    memo = HeaderMemo((InferRequest,))
    request = InferRequest(sha256="ab" * 32, path="/a.pte", method="forward")
    for value in (1.0, 2.0, 3.0):
        array = np.full((2, 3), value, dtype=np.float32)
        message, decoded = decode_message(encode_message(request, [array]), WORKER_REQUEST, memo)
        assert message == request
        np.testing.assert_array_equal(decoded[0], array)
    assert len(memo.layouts) == 1
    other = decode_message(encode_message(request, [np.ones(4, np.int64)]), WORKER_REQUEST, memo)
    assert other[1][0].dtype == np.int64 and other[1][0].shape == (4,)
    frame = encode_message(request, [np.ones((2, 3), np.float32)])
    with pytest.raises(RuntimeLayerError, match="shorter than its header"):
        decode_message(frame[:-4], WORKER_REQUEST, memo)
    decode_message(encode_message(DropRequest(drop=(1,)), []), WORKER_REQUEST, memo)
    assert len(memo.layouts) == 2


def test_a_frame_shorter_than_its_header_length_is_refused() -> None:
    with pytest.raises(RuntimeLayerError, match="header length"):
        decode_message((100).to_bytes(_LENGTH, "little") + b"{}", WORKER_REQUEST)


def test_a_header_with_other_keys_is_refused() -> None:
    message = {"op": "drop", "drop": []}
    with pytest.raises(RuntimeLayerError, match="needs exactly"):
        decode_message(_frame({"tensors": [], "message": message, "x": 1}), WORKER_REQUEST)


def test_replies_are_typed_with_the_shared_specs(artifacts: dict[str, Compiled]) -> None:
    """A real worker: it parses requests, answers typed replies, and refuses a malformed
    frame with an error reply instead of dying."""
    mlp = artifacts["mlp"]
    config = WorkerConfig(cache_bytes=1 << 26, readable=(str(mlp.path.parent),))
    worker = WorkerProcess.spawn(process_context(), config).await_ready(120)
    try:
        assert isinstance(worker.info, ReadyReply)
        assert worker.send(_frame({"tensors": [], "message": {"op": "describe"}})) is None
        refused, _ = worker.reply(60)
        assert isinstance(refused, ErrorReply) and refused.error == "protocol"

        describe = DescribeRequest(sha256=mlp.sha256, path=str(mlp.path))
        assert worker.send(encode_message(describe, [])) is None
        described, _ = worker.reply(60)
        assert isinstance(described, DescribeReply)
        assert described.methods["forward"].inputs[0].shape == (1, 16)

        infer = InferRequest(sha256=mlp.sha256, path=str(mlp.path), method="forward")
        x = mlp.model.inputs["forward"][0].numpy()
        assert worker.send(encode_message(infer, [x])) is None
        inferred, outputs = worker.reply(60)
        assert isinstance(inferred, InferReply) and inferred.hit
        assert inferred.load_ms >= 0 and inferred.execute_ms > 0
        expected = mlp.model.eager["forward"](mlp.model.inputs["forward"][0]).detach().numpy()
        np.testing.assert_allclose(outputs[0], expected, rtol=1e-4, atol=1e-5)
    finally:
        worker.kill()
