"""Session fixtures: compiled artifacts, one runtime pool and one /v2 server over a socket."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pteforge.runtime import RuntimePool
from pteforge.runtime.native import build_xnnpack_options
from tests.models import seq2seq_programs, shared_linear_programs, small_mlp_programs
from tests.runtime.helpers import (
    Compiled,
    MemoryResolver,
    build_app,
    compile_pte,
    crashing_copy,
    dynamic_mlp_programs,
    serve,
)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Compiled]:
    root = tmp_path_factory.mktemp("pte")
    return {
        "mlp": compile_pte(small_mlp_programs(), root / "mlp.pte"),
        "seq2seq": compile_pte(seq2seq_programs(), root / "seq2seq.pte"),
        "shared": compile_pte(shared_linear_programs(2048), root / "shared.pte"),
        "dynamic": compile_pte(dynamic_mlp_programs(), root / "dynamic.pte"),
    }


@pytest.fixture(scope="session")
def weight_cache_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_xnnpack_options(tmp_path_factory.mktemp("native"))


@pytest.fixture(scope="session")
def pool(
    tmp_path_factory: pytest.TempPathFactory, weight_cache_library: Path
) -> Iterator[RuntimePool]:
    with RuntimePool(
        2,
        64 << 20,
        tmp_path_factory.mktemp("artifacts"),
        weight_cache_library=weight_cache_library,
        request_timeout_s=60,
    ) as runtime_pool:
        yield runtime_pool


@dataclass
class Server:
    url: str
    resolver: MemoryResolver
    registry: object


@pytest.fixture(scope="session")
def server(pool: RuntimePool, artifacts: dict[str, Compiled]) -> Iterator[Server]:
    resolver = MemoryResolver()
    resolver.add("project-a", "mlp", artifacts["mlp"], as_path=False)
    resolver.add("project-a", "s2s", artifacts["seq2seq"], as_path=True)
    resolver.add("project-b", "other", artifacts["mlp"], as_path=True)
    resolver.add("project-a", "crash", crashing_copy(artifacts["mlp"]), as_path=True)
    app, registry = build_app(resolver, pool)
    with serve(app) as url:
        yield Server(url, resolver, registry)
