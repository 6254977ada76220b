"""Full-speed single requests (issue 20): a stateless request that finds the pool idle runs
on the wide worker with every core; while others are in flight, requests run on the
one-thread workers. The worker reports the threads ExecuTorch's threadpool has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from pteforge.runtime import RuntimePool
from pteforge.runtime.pool import InferResult
from pteforge.runtime.threads import usable_cores
from tests.runtime.helpers import Compiled


@pytest.fixture(scope="module")
def wide_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuntimePool]:
    with RuntimePool(
        1, 64 << 20, tmp_path_factory.mktemp("wide"), request_threads=None
    ) as runtime_pool:
        yield runtime_pool


def _eager(compiled: Compiled, x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return np.asarray(compiled.model.eager["forward"](x).numpy())


def test_a_lone_request_gets_every_core_and_concurrent_ones_one_each(
    wide_pool: RuntimePool, artifacts: dict[str, Compiled]
) -> None:
    mlp, cores = artifacts["mlp"], usable_cores()
    inputs = [torch.randn(*mlp.model.inputs["forward"][0].shape) for _ in range(6)]

    async def burst() -> list[InferResult]:
        return await asyncio.gather(
            *(wide_pool.infer_async(mlp.sha256, "forward", [x.numpy()], mlp.path) for x in inputs)
        )

    alone = wide_pool.infer(mlp.sha256, "forward", [inputs[0].numpy()], mlp.path)
    assert alone.threads == cores
    results = asyncio.run(burst())  # the first finds the pool idle, the others do not
    for x, result in zip(inputs, results, strict=True):
        np.testing.assert_allclose(result.outputs[0], _eager(mlp, x), rtol=1e-4, atol=1e-4)
    assert [r.threads for r in results] == [cores] + [1] * 5


def test_one_thread_pools_have_no_wide_worker(pool: RuntimePool) -> None:
    assert pool.routes.wide is None  # request_threads=1, the library's default
    assert pool.calls.in_flight is None  # and no request takes the in-flight lock
