"""docs/http-api.md is what the running service's OpenAPI document says."""

from __future__ import annotations

from pathlib import Path

import httpx

from pteforge.server.http.api_reference import render
from tests.server.service import ServiceProcess

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"


def test_reference_matches_the_service(service: ServiceProcess) -> None:
    document = httpx.get(f"{service.url}/openapi.json", timeout=60).raise_for_status().json()
    expected = render(document)
    assert REFERENCE.read_text() == expected, (
        "docs/http-api.md is stale: run `pteforge serve` and "
        "`python -m pteforge.server.http.api_reference URL > docs/http-api.md`"
    )


def test_reference_covers_every_operation(service: ServiceProcess) -> None:
    document = httpx.get(f"{service.url}/openapi.json", timeout=60).json()
    text = REFERENCE.read_text()
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"### `{method.upper()} {path}`" in text
