"""Downloads: the client's streamed, checked download, and the server's HEAD and Range
answers it relies on (over a real socket)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from pteforge.client import Artifact, Client, NotFoundError
from tests.server.service import ServiceProcess


@pytest.fixture
def raw(service: ServiceProcess, token: str) -> httpx.Client:
    return service.client(token)


def test_download_writes_the_checked_file(
    client: Client, artifact: Artifact, tmp_path: Path
) -> None:
    seen: list[tuple[int, int | None]] = []
    path = client.download(
        artifact, tmp_path / "model.pte", on_progress=lambda n, t: seen.append((n, t))
    )
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == artifact.sha256
    assert len(data) == artifact.size_bytes
    assert seen[-1] == (artifact.size_bytes, artifact.size_bytes)
    assert [p.name for p in tmp_path.iterdir()] == ["model.pte"]  # no partial file left


def test_download_by_id_checks_the_etag(client: Client, artifact: Artifact, tmp_path: Path) -> None:
    path = client.download(artifact.id, tmp_path / "by-id.pte")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == artifact.sha256


def test_a_missing_artifact_leaves_no_file(client: Client, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as info:
        client.download("art_missing", tmp_path / "missing.pte")
    assert info.value.status == 404 and info.value.code == "not_found"
    assert list(tmp_path.iterdir()) == []


def test_head_answers_the_headers_of_get(raw: httpx.Client, artifact: Artifact) -> None:
    url = f"/v1/artifacts/{artifact.id}/pte"
    head = raw.head(url)
    assert head.status_code == 200
    assert head.headers["content-length"] == str(artifact.size_bytes)
    assert head.headers["etag"] == f'"{artifact.sha256}"'
    assert head.headers["accept-ranges"] == "bytes"
    assert head.content == b""
    part = raw.head(url, headers={"Range": "bytes=0-9"})
    assert part.status_code == 206 and part.headers["content-length"] == "10"
    assert raw.head("/v1/artifacts/art_missing/pte").status_code == 404


@pytest.mark.parametrize("header", ["bytes=100-50", "bytes=x-y", "items=0-1", "bytes=0-1,4-5"])
def test_invalid_ranges_are_ignored(raw: httpx.Client, artifact: Artifact, header: str) -> None:
    response = raw.get(f"/v1/artifacts/{artifact.id}/pte", headers={"Range": header})
    assert response.status_code == 200, response.text
    assert len(response.content) == artifact.size_bytes
    assert "content-range" not in response.headers


def test_unsatisfiable_ranges_still_answer_416(raw: httpx.Client, artifact: Artifact) -> None:
    response = raw.get(
        f"/v1/artifacts/{artifact.id}/pte", headers={"Range": f"bytes={artifact.size_bytes}-"}
    )
    assert response.status_code == 416
    assert response.headers["content-range"] == f"bytes */{artifact.size_bytes}"
