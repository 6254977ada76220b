"""Fixtures of the service tests: one real server shared by the package (the restart test
starts its own), real model files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import fixtures
from tests.generation.lm_builder import LmFiles, build_tiny_lm
from tests.models import MultiMethod, hf_encoder_decoder_programs, save_programs
from tests.runtime.stateful_models import cached_lm_programs
from tests.server.helpers import (
    MIXED_PLAN,
    SHARED_PLAN,
    compile_files,
    read_events,
    submit,
    upload_methods,
    wait_job,
)
from tests.server.lm_serving import deploy_lm
from tests.server.service import ServiceProcess, running_service

MAX_UPLOAD_BYTES = 8 * 1024 * 1024

seq2seq_files = fixtures.seq2seq_files  # this package's, from its ``seq2seq``


@pytest.fixture(scope="package")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    # one compile worker: what a 2-core machine affords
    env = {"PTEFORGE_MAX_UPLOAD_BYTES": str(MAX_UPLOAD_BYTES), "PTEFORGE_COMPILE_WORKERS": "1"}
    with running_service(tmp_path_factory.mktemp("pteforge-home"), env) as svc:
        yield svc


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


@pytest.fixture
def cli_as_admin(service: ServiceProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """Remote ``pteforge`` commands run in this process (``pteforge.cli.main``) reach the
    shared server as its admin: ``PTEFORGE_URL`` and ``PTEFORGE_TOKEN`` set for the test."""
    assert service.admin_token, "first start printed no admin token"
    monkeypatch.setenv("PTEFORGE_URL", service.url)
    monkeypatch.setenv("PTEFORGE_TOKEN", service.admin_token)


@pytest.fixture(scope="package")
def seq2seq_program(admin: httpx.Client, seq2seq_files: dict[str, Path]) -> dict[str, Any]:
    """The seq2seq model uploaded once, one part per method."""
    return upload_methods(admin, seq2seq_files, name="seq2seq")


@pytest.fixture(scope="package")
def compiled(admin: httpx.Client, seq2seq_program: dict[str, Any]) -> dict[str, Any]:
    """The seq2seq program compiled once with a mixed plan (encode: XNNPACK, decode: portable)."""
    program = seq2seq_program
    job = submit(admin, program["id"], MIXED_PLAN)
    assert job["status"] in {"queued", "running"}
    events = read_events(admin, job["id"])
    done = wait_job(admin, job["id"])
    assert done["status"] == "succeeded", done
    artifact = admin.get(f"/v1/artifacts/{done['artifact_id']}").raise_for_status().json()
    return {"program": program, "job": done, "events": events, "artifact": artifact}


@pytest.fixture(scope="package")
def lm(tmp_path_factory: pytest.TempPathFactory) -> LmFiles:
    """The tiny Llama-style LM (built once per machine, cached) and its tokenizer files."""
    return build_tiny_lm("llama", tmp_path_factory.mktemp("lm"))


@pytest.fixture(scope="package")
def deployed(admin: httpx.Client, lm: LmFiles) -> str:
    """:data:`lm_serving.MODEL`: the LM as its version 1, with its tokenizer."""
    return deploy_lm(admin, lm)


@pytest.fixture(scope="package")
def cached_lm(
    admin: httpx.Client, tmp_path_factory: pytest.TempPathFactory
) -> tuple[MultiMethod, str]:
    """The decoder-only LM whose KV cache is buffers (``prefill``, then ``decode``) and the
    artifact it compiles to with :data:`SHARED_PLAN`: compiled once for the package (the
    sessions and gRPC tests both call it; each resets the eager model's state first)."""
    model = cached_lm_programs()
    files = save_programs(model.programs, tmp_path_factory.mktemp("cached-lm"))
    return model, compile_files(admin, files, "cached-lm", SHARED_PLAN)
