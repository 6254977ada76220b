"""Retries through a misbehaving proxy in front of the real server: idempotent calls are
tried again on 503 and broken connections, others never; a broken download resumes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pteforge.client import (
    Artifact,
    Client,
    ServiceUnavailableError,
    TransportError,
)
from tests.client.proxy import RESET, UNAVAILABLE, cut_after, flaky_proxy
from tests.server.service import ServiceProcess


def test_idempotent_calls_retry_resets_and_503(service: ServiceProcess, token: str) -> None:
    with flaky_proxy(service.port, [RESET, UNAVAILABLE, RESET]) as proxy:
        with Client(proxy.url, token) as client:
            assert isinstance(client.list_programs(), list)
        assert len(proxy.heads) == 4  # three failures, then the answer
        assert all(head.startswith(b"GET /v1/programs") for head in proxy.heads)


def test_retries_give_up(service: ServiceProcess, token: str) -> None:
    with flaky_proxy(service.port, [RESET] * 3) as proxy:
        with Client(proxy.url, token, retries=2) as client, pytest.raises(TransportError):
            client.list_jobs()
        assert len(proxy.heads) == 3
    with flaky_proxy(service.port, [UNAVAILABLE] * 3) as proxy:
        client = Client(proxy.url, token, retries=2)
        with client, pytest.raises(ServiceUnavailableError) as info:
            client.list_jobs()
        assert info.value.status == 503 and info.value.message == "the proxy says: later"


def test_uploads_are_never_retried(
    service: ServiceProcess, token: str, seq2seq_files: dict[str, Path]
) -> None:
    with flaky_proxy(service.port, [RESET]) as proxy:
        with Client(proxy.url, token) as client, pytest.raises(TransportError):
            client.upload_program(seq2seq_files)
        assert len(proxy.heads) == 1
    with flaky_proxy(service.port, [UNAVAILABLE]) as proxy:
        with Client(proxy.url, token) as client, pytest.raises(ServiceUnavailableError):
            client.upload_program(seq2seq_files)
        assert len(proxy.heads) == 1


def test_a_broken_download_resumes_with_range(
    service: ServiceProcess, token: str, artifact: Artifact, tmp_path: Path
) -> None:
    with flaky_proxy(service.port, [cut_after(4096)]) as proxy:
        with Client(proxy.url, token) as client:
            path = client.download(artifact, tmp_path / "resumed.pte")
        assert hashlib.sha256(path.read_bytes()).hexdigest() == artifact.sha256
        assert len(proxy.heads) == 2
        resumed = proxy.heads[1].decode().lower()
        assert "range: bytes=" in resumed and f'if-range: "{artifact.sha256}"' in resumed
