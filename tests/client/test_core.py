"""The client's sans-IO core without a server: event parsing, error mapping, the tensor
codec against the server's own codec, retry decisions, the login file and the stage display."""

from __future__ import annotations

import io
import re
import stat
from pathlib import Path

import httpx
import numpy as np
import pytest
from rich.console import Console

from pteforge.client import (
    APIError,
    Artifact,
    BadRequestError,
    InferenceError,
    InsufficientStorageError,
    InvalidInputError,
    InvalidPlanError,
    InvalidRequestError,
    Job,
    LoweringFailedError,
    NotFoundError,
    ServiceUnavailableError,
    TooManyRequestsError,
    TransportError,
    UploadRejectedError,
)
from pteforge.client.calls import Attempts, Call, Reply, RetryPolicy
from pteforge.client.config import NotConfiguredError, load_credentials, save_credentials
from pteforge.client.errors import error_from_body
from pteforge.client.profiles import ProfileReport, profile_report
from pteforge.client.render import ByteProgress, StageDisplay
from pteforge.client.sse import EventParser
from pteforge.client.tensors import decode_response, encode_request, named_inputs
from pteforge.client.views import stage_plan
from pteforge.runtime.metadata import MethodSignature, TensorSpec
from pteforge.runtime.oip_codec import decode_infer_request, encode_infer_response


def test_events_survive_any_chunking() -> None:
    stream = (
        b': keep-alive\n\nid: 1\nevent: job\ndata: {"a": 1}\n\n'
        b"id: 2\r\nevent: job\r\ndata: line one\r\ndata: line two\r\n\r\nevent: end\ndata: {}\n\n"
    )
    for size in (1, 2, 7, len(stream)):
        parser = EventParser()
        events = []
        for i in range(0, len(stream), size):
            events += parser.feed(stream[i : i + size])
        assert [(e.event, e.data, e.id) for e in events] == [
            ("job", '{"a": 1}', "1"),
            ("job", "line one\nline two", "2"),
            ("end", "{}", None),
        ]
        assert parser.last_id == "2"


@pytest.mark.parametrize(
    ("status", "body", "cls", "code"),
    [
        (404, {"error": {"code": "not_found", "message": "m"}}, NotFoundError, "not_found"),
        (422, {"error": {"code": "invalid_plan", "message": "m"}}, InvalidPlanError, None),
        (422, {"error": {"code": "unsafe_operator", "message": "m"}}, UploadRejectedError, None),
        (422, {"error": {"code": "brand_new", "message": "m"}}, InvalidRequestError, None),
        (400, {"error": "bad tensor"}, InvalidInputError, "invalid_input"),  # /v2 shape
        (422, {"error": "crashed"}, InferenceError, "inference_failed"),
        (503, None, ServiceUnavailableError, "service_unavailable"),
        (
            507,
            {"error": {"code": "insufficient_storage", "message": "quota"}},
            InsufficientStorageError,
            None,
        ),
        (429, {"error": {"code": "too_many_requests", "message": "m"}}, TooManyRequestsError, None),
        (429, {"error": "over its share"}, TooManyRequestsError, "too_many_requests"),  # /v2
        (418, "teapot", BadRequestError, "bad_request"),
    ],
)
def test_error_codes_map_to_classes(
    status: int, body: object, cls: type[APIError], code: str | None
) -> None:
    error = error_from_body(status, body, "fallback")
    assert type(error) is cls and error.status == status
    if code is not None:
        assert error.code == code


def test_a_job_error_code_picks_the_class() -> None:
    from pteforge.client.errors import error_class

    assert error_class(422, "lowering_failed") is LoweringFailedError


def test_the_request_is_what_the_server_decodes_and_back() -> None:
    signature = MethodSignature(
        "decode",
        (TensorSpec("tokens", "int64", (1, 4)), TensorSpec("memory", "float32", (1, 8, 32))),
        (TensorSpec("logits", "float32", (1, 4, 64)), TensorSpec("mask", "bool", (1, 4))),
    )
    tokens = np.arange(4, dtype=np.int64).reshape(1, 4)
    memory = np.random.default_rng(0).standard_normal((1, 8, 32)).astype(np.float32)
    arrays = named_inputs([tokens, memory], ["tokens", "memory"])
    body, headers = encode_request(arrays, {"sequence_id": "s1", "sequence_start": True})
    request = decode_infer_request(body, int(headers["Inference-Header-Content-Length"]), signature)
    np.testing.assert_array_equal(request.inputs[0], tokens)
    np.testing.assert_array_equal(request.inputs[1], memory)
    assert request.parameters["sequence_id"] == "s1"
    assert all(o.binary for o in request.outputs)
    outputs = [np.full((1, 4, 64), np.nan, np.float32), np.array([[True, False, True, True]])]
    answer, length = encode_infer_response("art.decode", request, signature, outputs, {"t": 1})
    headers = httpx.Headers({"inference-header-content-length": str(length)})
    result = decode_response(answer, headers)
    assert (result.model, result.version, result.parameters) == ("art.decode", "1", {"t": 1})
    decoded = result.outputs
    assert list(decoded) == ["logits", "mask"]
    assert np.isnan(decoded["logits"]).all() and decoded["mask"].dtype == np.bool_


def test_inputs_in_order_need_the_right_count() -> None:
    with pytest.raises(InvalidInputError, match=r"got 1 inputs, the method takes 2 inputs: a, b$"):
        named_inputs([np.zeros(1)], ["a", "b"])
    with pytest.raises(InvalidInputError, match="uint16"):
        named_inputs({"a": np.zeros(1, np.uint16)}, None)


def _reply(status: int, retry_after: str | None = None) -> Reply:
    return Reply(status, {"retry-after": retry_after} if retry_after else {})


def test_only_idempotent_calls_are_retried() -> None:
    policy = RetryPolicy(retries=2)
    get = Attempts(Call("GET", "/v1/jobs", idempotent=True), policy)
    assert get.after_reply(_reply(503, "3")) == 3.0  # Retry-After wins
    assert 0 < get.after_error(ConnectionResetError()) <= policy.max_backoff
    assert get.after_reply(_reply(503)) is None  # retries used up: the 503 is final
    post = Attempts(Call("POST", "/v1/programs"), policy)
    assert post.after_reply(_reply(503)) is None
    with pytest.raises(TransportError, match="POST /v1/programs"):
        post.after_error(ConnectionResetError("reset"))


def test_an_error_carries_the_retry_after_it_was_sent_with() -> None:
    posted = Attempts(Call("POST", "/v2/models/m/infer"), RetryPolicy())
    with pytest.raises(TooManyRequestsError) as refused:
        posted.result(Reply(429, {"retry-after": "1"}, b'{"error": "over its share"}'))
    assert refused.value.retry_after == 1.0 and refused.value.message == "over its share"
    with pytest.raises(NotFoundError) as missing:
        posted.result(_reply(404))
    assert missing.value.retry_after is None


def test_a_retried_delete_that_went_through_is_done() -> None:
    attempts = Attempts(Call("DELETE", "/v1/programs/p", ok=(204,), idempotent=True), RetryPolicy())
    with pytest.raises(NotFoundError):
        attempts.result(_reply(404))  # first try: the program really is not there
    attempts.after_error(ConnectionResetError())
    assert attempts.result(_reply(404)).status == 404


def test_login_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTEFORGE_CONFIG", str(tmp_path / "dir" / "client.json"))
    monkeypatch.delenv("PTEFORGE_URL", raising=False)
    monkeypatch.delenv("PTEFORGE_TOKEN", raising=False)
    with pytest.raises(NotConfiguredError, match="pteforge login"):
        load_credentials()
    path = save_credentials("http://h:1/", "ptf_saved")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    creds = load_credentials()
    assert (creds.url, creds.token) == ("http://h:1", "ptf_saved")
    monkeypatch.setenv("PTEFORGE_TOKEN", "ptf_env")
    assert load_credentials().token == "ptf_env"
    assert load_credentials(token="ptf_arg").token == "ptf_arg"


def _job(status: str, stage: str | None) -> Job:
    return Job.from_json({"id": "job_1", "status": status, "stage": stage})


def test_stage_display_times_stages_by_the_servers_stamps() -> None:
    """Events that arrive together (a stream catching up) are timed by each change's
    ``changed_at``, not by when they came: the CLI showed 'loading took 0.00s' and gave
    loading's time to the next stage."""
    console = Console(file=io.StringIO(), force_terminal=False, width=100)
    display = StageDisplay(console, stage_plan({}, ["forward"]))
    stamps = [("queued", None, "00.0"), ("running", "loading", "00.5")]
    stamps += [("running", "to_edge", "02.0"), ("succeeded", "to_edge", "02.25")]
    for status, stage, second in stamps:
        changed = f"2026-01-01T00:00:{second}Z"
        display(Job.from_json({"id": "j", "status": status, "stage": stage, "changed_at": changed}))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "loading (queued took 0.50s)" in text and "to_edge (loading took 1.50s)" in text
    assert "succeeded (to_edge took 0.25s)" in text


@pytest.mark.parametrize("terminal", [True, False])
def test_stage_display_numbers_every_stage(terminal: bool) -> None:
    console = Console(file=io.StringIO(), force_terminal=terminal, width=100)
    display = StageDisplay(console, stage_plan({}, ["forward"]))
    events = [("queued", None), ("running", None), ("running", "loading"), ("running", "to_edge")]
    events += [("running", "emit"), ("running", "new_stage"), ("running", "verify")]
    events += [("running", "store"), ("succeeded", "store")]
    with display.running():
        for status, stage in events:
            display(_job(status, stage))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "succeeded" in text
    if terminal:  # a bar: complete once the job succeeded
        (task,) = display.progress.tasks
        assert task.completed == task.total == 7
    else:  # a line per stage, counted without a gap; an unexpected stage grows the total
        steps = re.findall(r"^\[(\d+)/(\d+)\] (\w+)", text, re.MULTILINE)
        assert [int(s[0]) for s in steps] == list(range(1, 8))
        assert steps[4] == ("5", "7", "new_stage") and steps[-1] == ("7", "7", "store")
    progress = ByteProgress(console, "model.pte")
    with progress.running():
        progress(10, 100)
        progress(100, 100)


def test_a_profile_from_a_newer_server_is_read() -> None:
    """A field (or a nested one) this client does not know is ignored, not a failure."""
    body = {
        "artifact_id": "art_x", "method": "forward", "iterations": 3,
        "latency_us": {"min": 1, "p50": 2, "p90": 3, "max": 4, "samples": [1.0], "later": 1},
        "load_ms": {"cold": 5.0, "warm": 1.0}, "peak_memory_bytes": 7,
        "operators": [
            {"name": "a", "backend": "b", "calls": 1, "total_us": 2.0, "share": 1.0, "new": 2}
        ],
        "added_by_a_newer_server": [1],
    }  # fmt: skip
    report = profile_report(body)
    assert report.latency_us.p50 == 2 and report.operators[0].total_us == 2.0
    with pytest.raises(ValueError):  # the contract itself still refuses them
        ProfileReport.model_validate(body)


def test_a_method_the_numerics_check_could_not_run_is_a_failure_on_one_line() -> None:
    """A MobileNetV2 under XNNPACK int8 dynamic fails at execute (upstream XNNPACK): the
    artifact is kept with numerics status ``error``, and no warning said so."""
    message = "RuntimeError: execute() failed\nruntime log:\n[XNNExecutor.cpp:169] Internal"
    numerics = {"methods": {"forward": {"status": "error", "message": message}}}
    artifact = Artifact.from_json({"id": "art_1", "sha256": "0", "numerics": numerics})
    (failure,) = artifact.numerics_failures()
    assert failure.startswith("artifact art_1: method 'forward' failed to run in the numerics")
    assert "execute() failed runtime log: [XNNExecutor.cpp:169] Internal (the" in failure
    zero = {"forward": {"status": "passed", "message": "the outputs are all zero"}}
    warned = Artifact.from_json({"id": "art_2", "sha256": "0", "numerics": {"methods": zero}})
    assert warned.numerics_failures() == [
        "artifact art_2: method 'forward' passed its numerics check, but the outputs are all "
        "zero (the artifact is kept: check its outputs before use)"
    ]
