"""Fixtures of the client tests: a real ``pteforge serve`` on a socket (the test process's
shared one), the tiny seq2seq model, and a client of each kind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pteforge.client import Artifact, Client, Job, Program
from tests import fixtures
from tests.models import MultiMethod, seq2seq_programs
from tests.server.service import ServiceProcess

MIXED_PLAN = {"methods": {"encode": {"partitioners": ["xnnpack"]}, "decode": {}}}
OVER_TOLERANCE_PLAN = {"all": {"partitioners": ["xnnpack"]}, "verify": {"rtol": 1e-30}}
"""XNNPACK with a tolerance no fp32 run meets: the artifact is kept, ``over_tolerance``."""

seq2seq_files = fixtures.seq2seq_files  # this package's, from its ``seq2seq``


@pytest.fixture(scope="package")
def service(shared_service: ServiceProcess) -> ServiceProcess:
    """The server of this test process, shared with other packages (``tests/conftest.py``)."""
    return shared_service


@pytest.fixture(scope="package")
def token(service: ServiceProcess) -> str:
    assert service.admin_token, "first start printed no admin token"
    return service.admin_token


@pytest.fixture
def client(service: ServiceProcess, token: str) -> Iterator[Client]:
    with Client(service.url, token) as client:
        yield client


@pytest.fixture(scope="package")
def seq2seq() -> MultiMethod:
    """A tiny ``nn.Transformer``-style encoder/decoder: ``encode`` and ``decode``."""
    return seq2seq_programs()


@pytest.fixture(scope="package")
def program(service: ServiceProcess, token: str, seq2seq: MultiMethod) -> Program:
    """The model uploaded once, from ``ExportedProgram`` objects."""
    with Client(service.url, token) as client:
        return client.upload_program(seq2seq.programs, name="seq2seq")


@pytest.fixture(scope="package")
def compiled(service: ServiceProcess, token: str, program: Program) -> tuple[Artifact, list[Job]]:
    """The program compiled once with a mixed plan (encode: XNNPACK, decode: portable), and
    the job as each of its events showed it."""
    events: list[Job] = []
    with Client(service.url, token) as client:
        return client.compile(program, MIXED_PLAN, on_stage=events.append), events


@pytest.fixture(scope="package")
def artifact(compiled: tuple[Artifact, list[Job]]) -> Artifact:
    return compiled[0]


@pytest.fixture(scope="package")
def compile_events(compiled: tuple[Artifact, list[Job]]) -> list[Job]:
    return compiled[1]
