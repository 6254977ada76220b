"""Session fixtures: real archives and a real ``.pte`` built once for all sandbox tests."""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from pteforge.children.forkserver import SANDBOX_PRELOAD
from pteforge.server.sandbox import (
    ForkServerIsolation,
    Isolation,
    SubprocessIsolation,
)
from tests.models import MultiMethod, shared_linear_programs, small_mlp_programs

from .archives import dynamic_program, save_programs


@dataclass
class ValidArchives:
    single: Path  # torch.export.save of one program ("model")
    multi: Path  # package_pt2 of two programs
    dynamic: Path  # dynamic shapes: expr_str symbols and guards_code
    single_source: MultiMethod
    multi_source: MultiMethod
    dynamic_source: torch.export.ExportedProgram


@pytest.fixture(scope="session")
def valid_archives(tmp_path_factory: pytest.TempPathFactory) -> ValidArchives:
    base = tmp_path_factory.mktemp("valid")
    mlp = small_mlp_programs()
    pair = shared_linear_programs(features=16)
    dyn = dynamic_program()
    single = base / "single.pt2"
    torch.export.save(mlp.programs["forward"], single)
    dynamic = base / "dynamic.pt2"
    torch.export.save(dyn, dynamic)
    multi = save_programs(pair.programs, base / "multi.pt2")
    return ValidArchives(single, multi, dynamic, mlp, pair, dyn)


@pytest.fixture(scope="session")
def mlp_pte(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    programs = small_mlp_programs().programs
    lowered = to_edge_transform_and_lower(programs, partitioner=[XnnpackPartitioner()])
    path = tmp_path_factory.mktemp("pte") / "mlp.pte"
    path.write_bytes(lowered.to_executorch().buffer)
    return path


@pytest.fixture(scope="session", params=["subprocess", "forkserver"])
def isolation(request: pytest.FixtureRequest) -> Isolation:
    """Both ways a sandbox child starts: a fresh interpreter, or forked from the fork server
    (what the server uses; here the test process's, preloaded like the server's)."""
    if request.param == "subprocess":
        return SubprocessIsolation()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(SANDBOX_PRELOAD)  # no effect if another test started it first
    return ForkServerIsolation(ctx)
