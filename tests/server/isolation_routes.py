"""The requests of ``test_project_isolation``: for every /v1 and /v2 route, the requests that
name one of project B's things (``{key}`` of :data:`MISSING` in the url and JSON strings),
filled with B's ids or with missing ones of the same kinds."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from tests.server.model_names import infer_body

Ids = Mapping[str, str]
Call = Callable[[Ids], dict[str, Any]]
MODEL = "iso-victim"
TOKENIZER = {"model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1}, "unk_token": "a"}}
MISSING = {
    "prog": "prog_" + "0" * 32,
    "job": "job_" + "0" * 32,
    "pjob": "job_" + "1" * 32,
    "art": "art_" + "0" * 32,
    "up": "art_" + "1" * 32,
    "sep": "art_" + "2" * 32,  # an uploaded .pte with its .ptd
    "model": "iso-absent",
}


def _post(url: str, body: dict[str, Any]) -> Call:
    return _req("POST", url, json=body)


def _fill(text: str, ids: Ids) -> str:
    for key, value in ids.items():
        text = text.replace(f"{{{key}}}", value)
    return text


def _req(method: str, url: str, **kwargs: Any) -> Call:
    """A request about the things ``ids`` names: ``{key}`` in the url and in JSON strings."""

    def call(ids: Ids) -> dict[str, Any]:
        body = kwargs.get("json")
        filled = {} if body is None else {"json": json.loads(_fill(json.dumps(body), ids))}
        return {**kwargs, **filled, "method": method, "url": _fill(url, ids)}

    return call


_INFER = infer_body()
_TEXT = {"text_input": "a", "parameters": {"max_tokens": 1}}
_CHAT = {"model": "{model}", "messages": [{"role": "user", "content": "a"}], "max_tokens": 1}
_RESPONSE = {"model": "{model}", "input": "a", "max_output_tokens": 1}
_SESSION = {"X-Pteforge-Session": "iso-chat"}  # a session key B may use too
TOKENIZER_FILES = {"tokenizer": ("tokenizer.json", json.dumps(TOKENIZER).encode())}
# Routes that read (asked by the owner too) and routes that change things (A's only).
READS: dict[tuple[str, str], list[Call]] = {
    ("GET", "/v1/programs/{program_id}"): [_req("GET", "/v1/programs/{prog}")],
    ("GET", "/v1/jobs/{job_id}"): [_req("GET", "/v1/jobs/{job}"), _req("GET", "/v1/jobs/{pjob}")],
    ("GET", "/v1/jobs/{job_id}/events"): [_req("GET", "/v1/jobs/{job}/events")],
    ("GET", "/v1/jobs/{job_id}/profile"): [_req("GET", "/v1/jobs/{pjob}/profile")],
    ("GET", "/v1/artifacts/{artifact_id}"): [_req("GET", "/v1/artifacts/{art}")],
    ("GET", "/v1/artifacts/{artifact_id}/pte"): [
        _req("GET", "/v1/artifacts/{art}/pte"),
        _req("GET", "/v1/artifacts/{up}/pte", headers={"Range": "bytes=0-9"}),
    ],
    ("HEAD", "/v1/artifacts/{artifact_id}/pte"): [_req("HEAD", "/v1/artifacts/{art}/pte")],
    ("GET", "/v1/artifacts/{artifact_id}/bpte"): [_req("GET", "/v1/artifacts/{art}/bpte")],
    ("GET", "/v1/artifacts/{artifact_id}/ptd"): [
        _req("GET", "/v1/artifacts/{sep}/ptd"),
        _req("GET", "/v1/artifacts/{sep}/ptd", headers={"Range": "bytes=0-9"}),
    ],
    ("HEAD", "/v1/artifacts/{artifact_id}/ptd"): [_req("HEAD", "/v1/artifacts/{sep}/ptd")],
    ("GET", "/v1/models/{name}"): [_req("GET", "/v1/models/{model}")],
    ("GET", "/v1/models/{name}/versions/{version}/tokenizer"): [
        _req("GET", "/v1/models/{model}/versions/1/tokenizer")
    ],
    ("GET", "/v2/models/{model}"): [
        _req("GET", "/v2/models/{up}.forward"),
        _req("GET", "/v2/models/{model}.forward"),
    ],
    ("GET", "/v2/models/{model}/versions/{version}"): [
        _req("GET", "/v2/models/{model}.forward/versions/1")
    ],
    ("GET", "/v2/models/{model}/ready"): [_req("GET", "/v2/models/{up}.forward/ready")],
    ("GET", "/v2/models/{model}/versions/{version}/ready"): [
        _req("GET", "/v2/models/{model}.forward/versions/1/ready")
    ],
    ("GET", "/v2/models/{model}/config"): [
        _req("GET", "/v2/models/{up}.forward/config"),
        _req("GET", "/v2/models/{model}.forward/config"),
    ],
    ("GET", "/v2/models/{model}/versions/{version}/config"): [
        _req("GET", "/v2/models/{model}.forward/versions/1/config")
    ],
    ("GET", "/v2/models/{model}/stats"): [_req("GET", "/v2/models/{model}.forward/stats")],
    ("GET", "/v2/models/{model}/versions/{version}/stats"): [
        _req("GET", "/v2/models/{up}.forward/versions/1/stats")
    ],
    ("POST", "/v2/repository/models/{model}/load"): [
        _post("/v2/repository/models/{up}.forward/load", {}),
        _post("/v2/repository/models/{model}.forward/load", {}),
    ],
    ("POST", "/v2/models/{model}/infer"): [
        _req("POST", "/v2/models/{up}.forward/infer", json=_INFER),
        _req("POST", "/v2/models/{model}.forward/infer", json=_INFER),
    ],
    ("POST", "/v2/models/{model}/versions/{version}/infer"): [
        _req("POST", "/v2/models/{model}.forward/versions/1/infer", json=_INFER)
    ],
    ("POST", "/v2/models/{model}/generate"): [
        _post("/v2/models/{model}/generate", _TEXT),
        _req("POST", "/v2/models/{model}/generate", json=_TEXT, headers=_SESSION),
    ],
    ("POST", "/v2/models/{model}/generate_stream"): [
        _post("/v2/models/{model}/generate_stream", _TEXT)
    ],
    ("POST", "/v2/models/{model}/versions/{version}/generate"): [
        _post("/v2/models/{model}/versions/1/generate", _TEXT)
    ],
    ("POST", "/v2/models/{model}/versions/{version}/generate_stream"): [
        _post("/v2/models/{model}/versions/1/generate_stream", _TEXT)
    ],
    ("POST", "/v1/completions"): [
        _post("/v1/completions", {"model": "{model}", "prompt": "a", "max_tokens": 1}),
        _post("/v1/completions", {"model": "{model}:1", "prompt": "a", "stream": True}),
    ],
    ("POST", "/v1/chat/completions"): [
        _post("/v1/chat/completions", _CHAT),
        _req("POST", "/v1/chat/completions", json=_CHAT, headers=_SESSION),
    ],
    ("POST", "/v1/responses"): [
        _post("/v1/responses", _RESPONSE),
        _post("/v1/responses", {**_RESPONSE, "stream": True}),
        _req("POST", "/v1/responses", json=_RESPONSE, headers=_SESSION),
    ],
}
CHANGES: dict[tuple[str, str], list[Call]] = {
    ("DELETE", "/v1/programs/{program_id}"): [_req("DELETE", "/v1/programs/{prog}")],
    ("POST", "/v1/compile-jobs"): [
        _req("POST", "/v1/compile-jobs", json={"program_id": "{prog}", "plan": {}})
    ],
    ("POST", "/v1/profile-jobs"): [
        _req("POST", "/v1/profile-jobs", json={"artifact_id": "{art}", "method": "forward"})
    ],
    ("POST", "/v1/jobs/{job_id}/cancel"): [_req("POST", "/v1/jobs/{job}/cancel")],
    ("DELETE", "/v1/artifacts/{artifact_id}"): [_req("DELETE", "/v1/artifacts/{up}")],
    ("POST", "/v1/models/{name}/versions"): [  # B's artifact under a name of A's
        _req("POST", "/v1/models/a-model/versions", json={"artifact_id": "{up}"})
    ],
    ("DELETE", "/v1/models/{name}/versions/{version}"): [
        _req("DELETE", "/v1/models/{model}/versions/1")
    ],
    ("PUT", "/v1/models/{name}/versions/{version}/tokenizer"): [
        _req("PUT", "/v1/models/{model}/versions/1/tokenizer", files=TOKENIZER_FILES)
    ],
}
LISTINGS = {"/v1/programs", "/v1/jobs", "/v1/artifacts", "/v1/models", "/v2/models/stats"}
UNSCOPED = {  # routes that name no project's thing
    ("GET", "/v1/health"): "health",
    ("GET", "/health"): "health",
    ("GET", "/v2/health/live"): "health",
    ("GET", "/v2/health/ready"): "health",
    ("GET", "/v2"): "server metadata",
    ("POST", "/v2/repository/index"): "the caller's models only: tests/server/test_repository.py",
    ("GET", "/v1/backends"): "the catalog and this host",
    ("POST", "/v1/programs"): "an upload names nothing that exists",
    ("POST", "/v1/artifacts"): "an upload names nothing that exists",
    ("GET", "/metrics"): "operators' (PTEFORGE_METRICS_TOKEN): see docs/SECURITY.md",
}
