"""The /v1 JSON budget (red-team pass): every route whose body is JSON reads it under
``max_json_body_bytes`` (16 MiB by default) as it arrives, and refuses a larger one with a
413 naming the limit before it is parsed."""

from __future__ import annotations

import gzip
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute

from pteforge.server.app import create_app
from pteforge.server.http.bodies import CappedJsonRoute
from pteforge.server.settings import Settings
from tests.server.helpers import app_routes, assert_error, peak_growth_kib
from tests.server.service import ServiceProcess

LIMIT = Settings().max_json_body_bytes
# 24 MB of ``[[],[],...]``: ~1.7 GB of Python lists and pydantic values once decoded.
LISTS = b"[" + b",".join([b"[]"] * (12 * 1024 * 1024)) + b"]"
JSON = {"content-type": "application/json"}


def _chunks(body: bytes) -> Iterator[bytes]:
    """Sent chunked: no Content-Length to refuse up front, so the body is counted as read."""
    step = 1 << 20
    return (body[i : i + step] for i in range(0, len(body), step))


def _calibration_plan(data: bytes) -> bytes:
    target = b'{"quantize": "q", "calibration": [[{"shape": [1], "data": ' + data + b"}]]}"
    return b'{"program_id": "p", "plan": {"methods": {"forward": ' + target + b"}}}"


def test_every_v1_json_route_reads_its_body_under_the_budget(tmp_path: Path) -> None:
    app = create_app(Settings(home=tmp_path))
    taking_json = [
        route
        for route in app_routes(app.routes)
        if isinstance(route, APIRoute) and route.body_field is not None
    ]
    assert {r.path for r in taking_json} >= {"/v1/compile-jobs", "/v1/models/{name}/versions"}
    assert [r.path for r in taking_json if not isinstance(r, CappedJsonRoute)] == []


def test_a_calibration_set_over_the_budget_is_413_before_it_is_parsed(
    service: ServiceProcess, admin: httpx.Client
) -> None:
    """The compile job's plan was read whole (up to the 2 GiB upload limit) and decoded: a
    30 MB body grew the server by 2.1 GB. Now no more than the budget is held."""
    body = _calibration_plan(LISTS)
    answer, grown = peak_growth_kib(
        service.proc.pid,
        lambda: admin.post("/v1/compile-jobs", content=_chunks(body), headers=JSON),
    )
    assert_error(answer, 413, "payload_too_large")
    message = answer.json()["error"]["message"]
    assert f"exceeds the {LIMIT}-byte limit of JSON bodies" in message, message
    assert "PTEFORGE_MAX_JSON_BODY_BYTES" in message
    assert grown < 64 * 1024
    declared = admin.post("/v1/models/m/versions", content=body, headers=JSON)
    assert_error(declared, 413, "payload_too_large")
    assert f"request body of {len(body)} bytes exceeds the {LIMIT}-byte limit" in declared.text


def test_a_body_of_empty_lists_under_the_budget_is_413_before_it_is_parsed(
    service: ServiceProcess, admin: httpx.Client
) -> None:
    """3.2 MB of ``[[],[],...]`` is within the byte budget, but its 1.1 million lists took
    ~200 bytes each once parsed and validated (16 MiB of them: 1.2 GB): a body may open one
    array or object per 16 bytes of the budget."""
    lists = 1_100_000
    body = _calibration_plan(b"[" + b",".join([b"[]"] * lists) + b"]")
    assert len(body) < LIMIT
    answer, grown = peak_growth_kib(
        service.proc.pid, lambda: admin.post("/v1/compile-jobs", content=body, headers=JSON)
    )
    assert_error(answer, 413, "payload_too_large")
    message = answer.json()["error"]["message"]
    opened = lists + 9  # the lists, and the plan's own 9 arrays and objects around them
    assert f"opens {opened} arrays and objects, more than {LIMIT // 16}" in message, message
    assert grown < 64 * 1024


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v2/models/m/generate"])
def test_a_generation_body_over_the_budget_is_413(
    service: ServiceProcess, admin: httpx.Client, route: str
) -> None:
    """The generation routes (/v2 generate too) read up to the /v2 infer limit (256 MiB):
    30 MB of ``[[],...]`` chat messages made pydantic collect one error each, 15.7 GB."""
    body = b'{"model": "m", "text_input": "x", "messages": ' + LISTS + b"}"
    answer, grown = peak_growth_kib(
        service.proc.pid, lambda: admin.post(route, content=_chunks(body), headers=JSON)
    )
    assert answer.status_code == 413, answer.text
    assert f"exceeds the {LIMIT}-byte limit of JSON bodies" in answer.text
    assert grown < 64 * 1024


def test_a_compressed_json_body_is_415_and_many_form_fields_are_refused(
    admin: httpx.Client,
) -> None:
    """FastAPI does not inflate bodies: a gzip plan was a bare 400 'There was an error
    parsing the body'. And multipart text fields, each held in memory, were not counted:
    1000 fields of 60 KB grew the server by 59 MiB (up to the 2 GiB upload limit)."""
    packed = gzip.compress(b'{"program_id": "p", "plan": {}}')
    headers = {**JSON, "content-encoding": "gzip"}
    answer = admin.post("/v1/compile-jobs", content=packed, headers=headers)
    assert_error(answer, 415, "unsupported_media_type")
    assert "Content-Encoding 'gzip' is not taken" in answer.json()["error"]["message"]
    form = httpx.Request("POST", "/", files={"forward": ("f.pt2", b"x")}, data={"name": "n"})
    gzipped = admin.post(  # was a 422 'malformed multipart body: Expected boundary character'
        "/v1/programs",
        content=gzip.compress(form.read()),
        headers={"content-type": form.headers["content-type"], "content-encoding": "gzip"},
    )
    assert_error(gzipped, 415, "unsupported_media_type")
    assert "'gzip' is not taken on multipart uploads" in gzipped.json()["error"]["message"]
    fields = {f"f{i}": "v" for i in range(65)}
    many = admin.post("/v1/programs", files={"forward": ("f.pt2", b"x")}, data=fields)
    assert_error(many, 422, "invalid_request")
    assert "more than 64 parts" in many.json()["error"]["message"]


def test_a_body_nested_too_deeply_is_a_400_that_says_so(admin: httpx.Client) -> None:
    """Python's JSON decoder gives up past its recursion depth, which FastAPI answered as
    "There was an error parsing the body", naming nothing."""
    deep = b'{"program_id": "p", "plan": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    answer = admin.post("/v1/compile-jobs", content=deep, headers=JSON)
    assert_error(answer, 400, "bad_request")
    assert "nests too deeply" in answer.json()["error"]["message"]
    broken = admin.post("/v1/compile-jobs", content=b'{"program_id": ', headers=JSON)
    assert_error(broken, 422, "invalid_request")  # invalid JSON: named where it broke
    assert "not valid JSON (Expecting value at character 15)" in broken.text, broken.text


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/compile-jobs", b'{"program_id": "\\ud800", "plan": {"all": {}}}'),
        ("/v1/models/m/versions", b'{"artifact_id": "art_\\udc00"}'),
    ],
)
def test_a_lone_surrogate_in_a_json_string_is_a_400_that_says_so(
    admin: httpx.Client, path: str, body: bytes
) -> None:
    """JSON may escape half a UTF-16 pair; Python decodes it into a string the database
    refused with a 500 (``UnicodeEncodeError``). A whole pair is a character and passes."""
    answer = admin.post(path, content=body, headers=JSON)
    assert_error(answer, 400, "bad_request")
    assert "lone UTF-16 surrogate" in answer.json()["error"]["message"], answer.text
    emoji = admin.post(
        "/v1/models/m/versions", content=b'{"artifact_id": "\\ud83d\\ude00"}', headers=JSON
    )
    assert_error(emoji, 404, "not_found")


ITEMS = b"[" + b",".join([b"[]"] * 200_000) + b"]"  # 0.6 MB of bad items
KEYS = b"{" + b",".join(b'"k%d": []' % i for i in range(70_000)) + b"}"
SHAPES = b'{"program_id": "p", "plan": {"all": {"quantize": "q", "calibration": [[{"shape": '
PLAN = b'{"program_id": "p", "plan": '
BAD_ITEMS = {
    "shape": ("/v1/compile-jobs", SHAPES + ITEMS + b', "data": []}]]}}}'),
    "partitioners": ("/v1/compile-jobs", PLAN + b'{"all": {"partitioners": ' + ITEMS + b"}}}"),
    "methods": ("/v1/compile-jobs", PLAN + b'{"methods": ' + KEYS + b"}}"),
    "inputs": (
        "/v1/profile-jobs",
        b'{"artifact_id": "a", "method": "f", "inputs": ' + ITEMS + b"}",
    ),
    "messages": ("/v1/chat/completions", b'{"model": "m", "messages": ' + ITEMS + b"}"),
}


@pytest.mark.parametrize("field", list(BAD_ITEMS))
def test_a_body_of_bad_items_costs_one_error_not_one_each(
    service: ServiceProcess, admin: httpx.Client, field: str
) -> None:
    """Within the budget, pydantic reported every bad item of a list or dict, ~1 KB each:
    these 0.6 MB bodies grew the server by 140 to 240 MB (a 16 MiB one by gigabytes). Lists
    now stop at their first bad item, and dicts are refused past their size first."""
    route, body = BAD_ITEMS[field]
    answer, grown = peak_growth_kib(
        service.proc.pid, lambda: admin.post(route, content=body, headers=JSON)
    )
    assert 400 <= answer.status_code < 500, answer.text
    assert grown < 64 * 1024


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/compile-jobs"),
        ("POST", "/v1/profile-jobs"),
        ("POST", "/v1/models/m/versions"),
        ("POST", "/v1/artifacts"),
        ("PUT", "/v1/models/m/versions/1/tokenizer"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v2/models/m/infer"),
    ],
)
def test_a_caller_without_a_valid_token_is_401_before_its_body_is_read(
    service: ServiceProcess, method: str, path: str
) -> None:
    """FastAPI reads a JSON body before it solves the route's dependencies, so /v1 JSON routes
    made the server read and hold 16 MiB for a client with no token at all (30 connections:
    480 MB) before the 401. The headers alone now get the answer: the body is never sent."""
    for authorization in ("", "Authorization: Bearer not-a-token\r\n"):
        with socket.create_connection(("127.0.0.1", service.port), timeout=60) as client:
            client.sendall(
                f"{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                f"{authorization}Content-Length: {LIMIT - 1}\r\n\r\n".encode()
            )
            answer = client.recv(64)  # times out (a failure) if the server waits for the body
        assert answer.startswith(b"HTTP/1.1 401 "), (path, authorization, answer)
