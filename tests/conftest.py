"""The test tiers (``tests/tiers.py``): ``pytest --fast`` is ``make check``'s run, plain
``pytest`` (through ``tests/run-with-postgres.sh``) is ``make test``'s."""

from __future__ import annotations

import os
import random
import sys
import zlib
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from pteforge.backends import BackendCatalog, default_catalog
from pteforge.children.limits import FP32_CPU_ENV
from tests import tiers
from tests.server.service import ServiceProcess, running_service

_TESTS = Path(__file__).parent

SERVER_FIXTURES = frozenset({"service", "secure_service", "api", "shared_service"})
"""Fixtures that start a ``pteforge`` process; their users (direct or not) are marked."""
POSTGRES_FIXTURES = frozenset({"postgres_url", "secure_service"})
DIRECTORY_MARKERS = {
    "browser": ("server",),
    "cluster": ("server", "postgres"),
    "security": ("server", "postgres"),
}
"""Suites whose every test belongs to the full tier, whatever its fixtures."""
SLOW_TESTS = (
    # CPU seconds measured on the 2-core machine (pytest and the children it reaped):
    "tests/contracts/test_quiet.py",  # two fresh interpreters import torch and ExecuTorch
    "tests/test_package.py::test_the_runtime_fork_server_loads_no_compiler",  # 16 s: the same
    "tests/manager/test_cli.py",  # 63 s: pteforge compile in a subprocess per case
    "tests/manager/test_verify.py",  # 28 s
    "tests/manager/test_compile.py",  # 26 s: the transformers T5 among them
    "tests/manager/test_buffers.py",  # 19 s
    "tests/manager/test_reference_flows.py",  # 11 s
    "tests/backends/test_quantization.py",  # 32 s: calibrated int8 lowerings
    "tests/backends/test_openvino.py",  # 21 s
    "tests/backends/test_coreml.py",  # 16 s
    "tests/backends/test_catalog.py::test_xnnpack_options_reach_the_partitioner",  # 9 s
    "tests/backends/test_catalog.py::test_describe_covers_every_entry_in_order",  # 4 s
    "tests/backends/test_entries.py::test_entry_lowers_and_runs_like_eager[vulkan]",  # 11 s
    "tests/backends/test_entries.py::test_entry_lowers_and_runs_like_eager[xnnpack_pt2e_int8",
    "tests/backends/test_ethos_u.py",  # 5 s: Arm's quantizer and Vela
    "tests/backends/test_entries.py::test_entry_lowers_and_runs_like_eager[ethos",  # 4.5 s
    # wall seconds under xdist -n 2 (the fast tier's longest, make check's critical path):
    "tests/server/test_lowering_isolation.py::test_lowering_in_a_child_succeeds",  # 59 s
    "tests/runtime/test_http.py",  # 53 s: builds the seq2seq pair for tritonclient
    "tests/runtime/test_weight_cache.py::test_second_method_reuses_packed_weights",  # 46 s
    "tests/runtime/test_artifact_files.py",  # 40 s: compiles four models
    "tests/sandbox/test_pte.py::test_bit_flips_never_take_the_caller_down",  # 24 s
    "tests/sandbox/test_operators.py::test_registry_file_matches_the_installed_torch",  # 17 s
)
"""Tests marked ``slow`` here (node id prefixes): the heaviest lowerings and subprocess
imports (about 300 of the fast tier's 430 measured CPU seconds), then the longest tests
under ``-n 2``, which set how long ``make check`` takes. Cheaper tests of each layer
(every catalog entry's portable and XNNPACK lowering, the runtime, the sandbox) stay fast."""


SHARED_SERVICE_ENV = {
    "PTEFORGE_COMPILE_WORKERS": "1",  # what a 2-core machine affords
    "PTEFORGE_RUNTIME_POOL_SIZE": "1",
    # Its users compile dozens of jobs: one warm-up of the fork server lets every job's
    # lowering process start warm instead of each paying the first lowering (seconds).
    "PTEFORGE_COMPILE_WARMUP": "true",
}


@pytest.fixture(scope="module")
def catalog() -> BackendCatalog:
    """The backend catalog a server lowers with."""
    return default_catalog()


@pytest.fixture(scope="session")
def shared_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """One ``pteforge serve`` per test process (each xdist worker has its own session), for
    the packages that need nothing special of a server (the client, the docs, the browser):
    each used to start its own, once per process and package (the browser's once per
    module). Tests needing another environment (an upload limit, PostgreSQL, sessions off)
    start theirs."""
    with running_service(tmp_path_factory.mktemp("shared-home"), SHARED_SERVICE_ENV) as svc:
        yield svc


def _share_the_inference_protos() -> None:
    """Let KServe's client and tritonclient.grpc live in one test process.

    Both ship generated modules for the Open Inference Protocol's protobuf package
    ``inference`` under different file names (KServe's ``grpc_predict_v2.proto``,
    tritonclient's ``grpc_service.proto``), and protobuf's default pool refuses the second
    one to load ("duplicate symbol 'inference.ServerLiveRequest'"). The tests use KServe's
    REST client only, so its gRPC modules become tritonclient's (a superset with the same
    names), which the server loads too. The server never imports KServe.
    """
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    sys.modules.setdefault("kserve.protocol.grpc.grpc_predict_v2_pb2", service_pb2)
    sys.modules.setdefault("kserve.protocol.grpc.grpc_predict_v2_pb2_grpc", service_pb2_grpc)


def pytest_configure(config: pytest.Config) -> None:
    _share_the_inference_protos()
    for name, value in FP32_CPU_ENV.items():  # in-process OpenVINO runs as pteforge's do
        os.environ.setdefault(name, value)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier (make check): skip tests marked "
        + ", ".join(tiers.TIERED)
        + ", and fail any other test that starts one of those resources",
    )


def _implied_markers(item: pytest.Item) -> set[str]:
    names = set(getattr(item, "fixturenames", ()))
    found = set()
    if names & SERVER_FIXTURES:
        found.add("server")
    if names & POSTGRES_FIXTURES:
        found.add("postgres")
    suite = item.path.relative_to(_TESTS).parts[0] if item.path.is_relative_to(_TESTS) else ""
    found.update(DIRECTORY_MARKERS.get(suite, ()))
    if item.nodeid.startswith(SLOW_TESTS):
        found.add("slow")
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker in sorted(_implied_markers(item)):
            if item.get_closest_marker(marker) is None:
                item.add_marker(marker)
    fast = bool(config.getoption("--fast"))
    tiers.arm(fast)
    if not fast:
        return
    kept, dropped = [], []
    for item in items:
        tiered = any(item.get_closest_marker(m) for m in tiers.TIERED)
        (dropped if tiered else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _seed_the_generators(item: pytest.Item) -> None:
    """Seed Python's and torch's global generators from the test's id before its fixtures
    run, so an unseeded ``torch.randn`` draws the same inputs on every run: a test then
    passes or fails for good, never 1 run in N (files run whole on one xdist process, so
    a module fixture sees the same seed too)."""
    seed = zlib.crc32(item.nodeid.encode())
    random.seed(seed)
    torch = sys.modules.get("torch")  # only if the test's module brought it in
    if torch is not None:
        torch.manual_seed(seed)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _seed_the_generators(item)
    tiers.running(item)
    try:
        return (yield)
    finally:
        tiers.running(None)
