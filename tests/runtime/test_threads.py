"""Full-speed single requests (issue 20): a stateless request that finds the pool idle runs
on the wide worker with every core; while others are in flight, requests run on the
one-thread workers. The worker reports the threads ExecuTorch's threadpool has.
"""

from __future__ import annotations

import asyncio
import time
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


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_after_overlapping_requests_a_lone_one_waits_out_the_quiet_time(
    wide_pool: RuntimePool, artifacts: dict[str, Compiled]
) -> None:
    """Under many clients nothing is in flight between two requests now and then; those
    gaps must not send a request to the wide worker (its threads would take the cores the
    one-thread workers and the HTTP side use)."""
    mlp, cores = artifacts["mlp"], usable_cores()
    x = mlp.model.inputs["forward"][0].numpy()
    wide_pool.infer(mlp.sha256, "forward", [x], mlp.path)  # described and loaded, alone
    in_flight = wide_pool.calls.in_flight
    if in_flight is None:
        pytest.skip("one usable core: the pool has no wide worker")
    clock = in_flight.clock = Clock(time.monotonic() + in_flight.quiet_s)  # quiet since

    async def pair() -> list[InferResult]:
        return await asyncio.gather(
            *(wide_pool.infer_async(mlp.sha256, "forward", [x], mlp.path) for _ in range(2))
        )

    try:
        assert sorted(r.threads for r in asyncio.run(pair())) == [1, cores]
        assert wide_pool.infer(mlp.sha256, "forward", [x], mlp.path).threads == 1
        clock.now += 2 * in_flight.quiet_s
        assert wide_pool.infer(mlp.sha256, "forward", [x], mlp.path).threads == cores
    finally:
        in_flight.clock = time.monotonic


def test_one_thread_pools_have_no_wide_worker(pool: RuntimePool) -> None:
    assert pool.routes.wide is None  # request_threads=1, the library's default
    assert pool.calls.in_flight is None  # and no request takes the in-flight lock
