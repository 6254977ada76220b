"""The HTTP contract around the compiler: auth, tenants, errors, limits, hostile uploads."""

from __future__ import annotations

import io
import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.models import small_mlp_programs
from tests.server.conftest import MAX_UPLOAD_BYTES
from tests.server.helpers import assert_error, peak_growth_kib
from tests.server.service import ServiceProcess


def test_health_needs_no_token(service: ServiceProcess) -> None:
    with service.client() as anonymous:
        assert anonymous.get("/v1/health").json() == {"status": "ok"}
        # where vLLM, SGLang and TGI answer it: GuideLLM checks it before a benchmark
        assert anonymous.get("/health").json() == {"status": "ok"}


@pytest.mark.parametrize(
    "path",
    [
        "/v1/backends",
        "/v1/programs/x",
        "/v1/jobs/x",
        "/v1/artifacts/x",
        "/v1/programs",
        "/v1/jobs",
        "/v1/artifacts",
    ],
)
def test_routes_need_a_token(service: ServiceProcess, path: str) -> None:
    with service.client() as anonymous:
        assert_error(anonymous.get(path), 401, "unauthorized")
    with service.client("ptf_not-a-real-token") as stranger:
        assert_error(stranger.get(path), 401, "unauthorized")


def test_backends_catalog(admin: httpx.Client) -> None:
    entries = {e["name"]: e for e in admin.get("/v1/backends").raise_for_status().json()}
    assert entries["xnnpack"]["backend_id"] == "XnnpackBackend"
    assert entries["xnnpack"]["can_execute"] is True
    assert entries["portable"]["kind"] == "portable"
    assert all({"kind", "options_schema", "can_execute"} <= set(e) for e in entries.values())


def test_openapi_docs_served(admin: httpx.Client) -> None:
    assert admin.get("/docs").status_code == 200
    paths = admin.get("/openapi.json").json()["paths"]
    assert {"/v1/programs", "/v1/compile-jobs", "/v1/jobs/{job_id}/events"} <= set(paths)
    assert "post" in paths["/v2/models/{model}/infer"]


def test_tokens_create_prints_token_last(service: ServiceProcess) -> None:
    token = service.create_token("ci", "tokens-test")
    with service.client(token) as client:
        assert client.get("/v1/backends").status_code == 200


def test_upload_describes_methods(seq2seq_program: dict[str, Any]) -> None:
    program = seq2seq_program
    assert program["name"] == "seq2seq" and len(program["sha256"]) == 64
    methods = {m["name"]: m for m in program["methods"]}
    assert set(methods) == {"encode", "decode"}
    assert [i["shape"] for i in methods["decode"]["inputs"]] == [[1, 4], [1, 8, 32]]
    assert methods["encode"]["inputs"][0]["dtype"] == "int64"
    assert methods["decode"]["outputs"][0]["shape"] == [1, 4, 64]


def test_size_limit_answers_413(admin: httpx.Client) -> None:
    big = b"\0" * (MAX_UPLOAD_BYTES + 1)
    response = admin.post("/v1/programs", files={"forward": ("f.pt2", big)})
    assert_error(response, 413, "payload_too_large")


def test_size_limit_without_content_length(admin: httpx.Client) -> None:
    boundary = "pteforgeboundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="forward"; filename="f.pt2"\r\n\r\n'
    ).encode()

    def body():  # chunked: no Content-Length to refuse up front
        yield head
        for _ in range(MAX_UPLOAD_BYTES // (1 << 20) + 2):
            yield b"\0" * (1 << 20)
        yield f"\r\n--{boundary}--\r\n".encode()

    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    try:
        response = admin.post("/v1/programs", content=body(), headers=headers)
    except httpx.TransportError:
        return  # the server may close the connection mid-body after answering 413
    assert_error(response, 413, "payload_too_large")


PWNED = Path(tempfile.gettempdir()) / "pteforge-pwned"


def _pickle_bomb_archive() -> bytes:
    """A zip shaped like a ``torch.export.save`` archive whose payload pickle runs code."""

    class RunsCode:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {PWNED}",))

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("archive/version", "0")
        zf.writestr("archive/models/model.json", "{}")
        zf.writestr("archive/data/weights/model_weights_config.json", "{}")
        zf.writestr("archive/data/weights/weight_0", pickle.dumps(RunsCode()))
    return buffer.getvalue()


@pytest.mark.parametrize(
    "files",
    [
        {"forward": ("f.pt2", b"this is not a zip archive")},
        {"forward": ("f.pt2", b"PK\x03\x04" + b"\0" * 64)},
        {"bad name!": ("f.pt2", b"x")},
        {"forward": ("f.pt2", _pickle_bomb_archive())},
    ],
    ids=["not-zip", "truncated-zip", "bad-method-name", "pickled-code"],
)
def test_malformed_program_uploads_are_4xx(admin: httpx.Client, files: dict) -> None:
    response = admin.post("/v1/programs", files=files)
    assert 400 <= response.status_code < 500, response.text
    assert_error(response, response.status_code)
    assert admin.get("/v1/health").status_code == 200
    assert not PWNED.exists()


def test_non_multipart_upload_is_415(admin: httpx.Client) -> None:
    response = admin.post("/v1/programs", json={"encode": "x"})
    assert_error(response, 415, "unsupported_media_type")
    assert "application/json" in response.json()["error"]["message"]


def test_a_bad_part_beside_a_good_one_is_named(
    admin: httpx.Client, seq2seq_files: dict[str, Path]
) -> None:
    files = {
        "encode": ("enc.pt2", seq2seq_files["encode"].read_bytes()),
        "decode": ("dec.pt2", b"random bytes, not an archive"),
    }
    response = admin.post("/v1/programs", files=files)
    assert 400 <= response.status_code < 500, response.text
    assert "part 'decode'" in response.json()["error"]["message"]


@pytest.mark.parametrize("name", ["m" * 5000, "../x", "9lives", "éncode"])
def test_method_name_rule_is_stated(admin: httpx.Client, name: str) -> None:
    response = admin.post("/v1/programs", files={name: ("f.pt2", b"x")})
    assert_error(response, 422, "invalid_upload")
    assert "1 to 128 ASCII letters, digits or underscores" in response.json()["error"]["message"]


@pytest.mark.parametrize("name", ["p" * 201, "two\nlines"])
def test_program_name_rule_is_stated(admin: httpx.Client, name: str) -> None:
    """A program name is a label of at most 200 characters: refused before the archive
    is read (a 200-character name passes and the bad archive is what is refused)."""
    response = admin.post("/v1/programs", files={"forward": ("f.pt2", b"x")}, data={"name": name})
    assert_error(response, 422, "invalid_upload")
    message = response.json()["error"]["message"]
    assert message.startswith("field 'name': invalid program name"), message
    assert "1 to 200 characters, none of them a control character" in message
    longest = admin.post(
        "/v1/programs", files={"forward": ("f.pt2", b"x")}, data={"name": "p" * 200}
    )
    assert "name" not in longest.json()["error"]["message"], longest.text


def test_a_file_name_becomes_a_program_name_without_control_characters(
    admin: httpx.Client, tmp_path: Path
) -> None:
    """Without a ``name`` field a ``program`` part's file name names the program; it skipped
    the rule, so an escape sequence (httpx sends ESC and DEL as they are) reached listings
    and the terminal of whoever ran ``pteforge ls``."""
    from torch.export.pt2_archive._package import package_pt2

    archive = tmp_path / "mlp.pt2"
    package_pt2(archive, exported_programs=dict(small_mlp_programs().programs))
    part = ("mlp\x1b[2J\x7f.pt2", archive.read_bytes())
    response = admin.post("/v1/programs", files={"program": part})
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "mlp[2J.pt2"


def test_the_server_does_not_parse_a_programs_documents_itself(
    service: ServiceProcess, admin: httpx.Client
) -> None:
    """An archive whose models/forward.json is 8 MB of ``[[],[],...]`` (~170 MB once parsed;
    64 MiB per method and 64 methods are taken): the server parsed it itself, holding the GIL,
    and grew by that much; only the sandbox child parses documents now, and refuses it."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for rel, data in (
            ("archive_format", "pt2"),
            ("archive_version", "0"),
            ("byteorder", "little"),
        ):
            z.writestr(f"bomb/{rel}", data)
        z.writestr("bomb/models/forward.json", b"[" + b",".join([b"[]"] * 2_700_000) + b"]")
    files = {"forward": ("f.pt2", buf.getvalue())}
    answer, grown = peak_growth_kib(
        service.proc.pid, lambda: admin.post("/v1/programs", files=files)
    )
    assert_error(answer, 422, "invalid_program")
    assert grown < 64 * 1024


def test_invalid_json_says_so(admin: httpx.Client) -> None:
    response = admin.post(
        "/v1/compile-jobs",
        content=b'{"program_id": ',
        headers={"content-type": "application/json"},
    )
    assert_error(response, 422, "invalid_request")
    assert "not valid JSON" in response.json()["error"]["message"]


def test_malformed_pte_upload_is_4xx(admin: httpx.Client) -> None:
    response = admin.post("/v1/artifacts", files={"pte": ("x.pte", b"\x00" * 128)})
    assert 400 <= response.status_code < 500, response.text
    assert_error(response, response.status_code)
    assert admin.get("/v1/health").status_code == 200


def test_bad_plan_is_422(admin: httpx.Client, seq2seq_program: dict[str, Any]) -> None:
    program = seq2seq_program
    unknown_method = {"methods": {"nope": {}}}
    response = admin.post(
        "/v1/compile-jobs", json={"program_id": program["id"], "plan": unknown_method}
    )
    assert_error(response, 422, "invalid_plan")  # as a job queued with it fails
    assert "nope" in response.json()["error"]["message"]
    bad_target = {"all": {"partitioners": ["no-such-backend"]}}
    response = admin.post(
        "/v1/compile-jobs", json={"program_id": program["id"], "plan": bad_target}
    )
    assert_error(response, 422)


@pytest.mark.parametrize(
    ("plan", "words"),
    [
        ({"al": {"partitioners": ["xnnpack"]}}, "'al': unknown field"),
        ({"bogus": 1}, "'bogus': unknown field"),
        ({"all": {"delegate": {"backend_id": "Nope"}}}, "unknown backend id 'Nope'"),
        ({"all": {"quantize": "nope"}}, "unknown quantization recipe 'nope'"),
        ({"all": {"partitioners": ["nope"]}}, "'all.partitioners[0]': unknown partitioner"),
    ],
)
def test_plan_mistakes_are_422_at_submit(
    admin: httpx.Client, seq2seq_program: dict[str, Any], plan: dict[str, Any], words: str
) -> None:
    response = admin.post(
        "/v1/compile-jobs", json={"program_id": seq2seq_program["id"], "plan": plan}
    )
    assert_error(response, 422, "invalid_plan")
    assert words in response.json()["error"]["message"]
