"""The OpenAPI document tells the truth: a bounded schemathesis run against the real server
finds no server error and no answer the document does not describe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.server.service import ServiceProcess

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "allow_header_conformance",
        "unsupported_method",
    ]
)


def test_schemathesis_finds_nothing(service: ServiceProcess, tmp_path: Path) -> None:
    # A project of its own: the run's stateful phase may delete whatever it can list.
    token = service.create_token("schemathesis", "schemathesis-project")
    done = subprocess.run(
        [
            str(SCHEMATHESIS), "run", f"{service.url}/openapi.json",
            "--header", f"Authorization: Bearer {token}",
            "--checks", CHECKS,
            "--max-examples", "8",
            "--seed", "20261122",
            "--request-timeout", "120",
            "--no-color",
        ],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
    )  # fmt: skip
    report = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, report
    assert "failures" not in report.splitlines()[-1], report


def test_method_not_allowed_lists_every_method(service: ServiceProcess) -> None:
    answer = httpx.put(f"{service.url}/v1/programs/some-id")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, DELETE"
