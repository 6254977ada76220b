"""Fixtures of the service tests: one real server shared by the package (the restart test
starts its own), real model files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from tests.models import MultiMethod, hf_encoder_decoder_programs
from tests.server.helpers import upload_methods
from tests.server.service import ServiceProcess

MAX_UPLOAD_BYTES = 8 * 1024 * 1024


@pytest.fixture(scope="package")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    svc = ServiceProcess(  # one compile worker: what a 2-core machine affords
        tmp_path_factory.mktemp("pteforge-home"),
        env={"PTEFORGE_MAX_UPLOAD_BYTES": str(MAX_UPLOAD_BYTES), "PTEFORGE_COMPILE_WORKERS": "1"},
    )
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()


@pytest.fixture(scope="package")
def seq2seq() -> MultiMethod:
    """A transformers-built (T5) encoder/decoder: ``encode`` and ``decode`` methods."""
    return hf_encoder_decoder_programs()


@pytest.fixture(scope="package")
def admin(service: ServiceProcess) -> Iterator[httpx.Client]:
    """A client with the bootstrap admin token of the shared server."""
    assert service.admin_token, "first start printed no admin token"
    with service.client(service.admin_token) as client:
        yield client


@pytest.fixture(scope="package")
def seq2seq_files(
    seq2seq: MultiMethod, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Each method saved with ``torch.export.save``, as a client would upload it."""
    directory = tmp_path_factory.mktemp("seq2seq")
    files = {}
    for name, program in seq2seq.programs.items():
        files[name] = directory / f"{name}.pt2"
        torch.export.save(program, files[name])
    return files


@pytest.fixture(scope="package")
def seq2seq_program(admin: httpx.Client, seq2seq_files: dict[str, Path]) -> dict[str, Any]:
    """The seq2seq model uploaded once, one part per method."""
    return upload_methods(admin, seq2seq_files, name="seq2seq")
