"""``RuntimePool.infer_async``: the event-loop path the /v2 routes use, against eager
PyTorch, with requests and replies larger than a socket buffer, many concurrent callers
and a crashing artifact."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from pteforge.runtime import RuntimePool, WorkerTimeoutError
from pteforge.runtime.errors import CrashingInputError
from tests.models import MultiMethod
from tests.runtime.helpers import Compiled, compile_pte, crashing_copy


class Double(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    """A method whose 1 MiB output cannot arrive in one read from the worker's socket."""
    x = torch.randn(512, 512)
    program = torch.export.export(Double().eval(), (x,))
    model = MultiMethod({"forward": program}, {"forward": (x,)}, {"forward": Double()})
    return compile_pte(model, tmp_path_factory.mktemp("large") / "large.pte")


def test_a_reply_larger_than_the_socket_buffer(pool: RuntimePool, large: Compiled) -> None:
    x = large.model.inputs["forward"][0].numpy()

    async def call() -> np.ndarray:
        result = await pool.infer_async(large.sha256, "forward", [x], large.path)
        return result.outputs[0]

    np.testing.assert_allclose(asyncio.run(call()), x * 2.0)


def test_large_requests_queued_for_busy_workers(pool: RuntimePool, large: Compiled) -> None:
    """More large requests than workers: each frame is written by its own caller once it
    holds a worker, not by whoever hands the worker over."""
    inputs = [np.full((512, 512), float(i), dtype=np.float32) for i in range(3 * pool.size)]

    async def calls() -> list[np.ndarray]:
        results = await asyncio.gather(
            *(pool.infer_async(large.sha256, "forward", [x], large.path) for x in inputs)
        )
        return [r.outputs[0] for r in results]

    for x, output in zip(inputs, asyncio.run(calls()), strict=True):
        np.testing.assert_array_equal(output, x * 2.0)


def test_concurrent_async_and_blocking_callers_share_the_workers(
    pool: RuntimePool, artifacts: dict[str, Compiled]
) -> None:
    mlp = artifacts["mlp"]
    x = mlp.model.inputs["forward"][0]
    with torch.no_grad():
        expected = mlp.model.eager["forward"](x).numpy()

    async def many() -> list[np.ndarray]:
        calls = [pool.infer_async(mlp.sha256, "forward", [x.numpy()], mlp.path) for _ in range(24)]
        blocking = [asyncio.to_thread(pool.infer, mlp.sha256, "forward", [x.numpy()], mlp.path)
                    for _ in range(8)]  # fmt: skip
        return [r.outputs[0] for r in await asyncio.gather(*calls, *blocking)]

    for output in asyncio.run(many()):
        np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


def test_a_crash_fails_only_its_request(tmp_path: Path, artifacts: dict[str, Compiled]) -> None:
    crash, mlp = crashing_copy(artifacts["mlp"]), artifacts["mlp"]
    x = mlp.model.inputs["forward"][0]
    with torch.no_grad():
        expected = mlp.model.eager["forward"](x).numpy()

    async def run(pool: RuntimePool) -> None:
        with pytest.raises(CrashingInputError, match="crashed the runtime twice"):
            await pool.infer_async(crash.sha256, "forward", [x.numpy()], crash.path)
        result = await pool.infer_async(mlp.sha256, "forward", [x.numpy()], mlp.path)
        np.testing.assert_allclose(result.outputs[0], expected, rtol=1e-4, atol=1e-4)

    with RuntimePool(1, 1 << 26, tmp_path, request_timeout_s=60) as pool:
        asyncio.run(run(pool))
        assert pool.stats.worker_crashes == 2  # retried once on the replacement worker


def test_a_hung_worker_times_out_and_a_waiting_caller_gets_its_replacement(
    tmp_path: Path, artifacts: dict[str, Compiled]
) -> None:
    mlp = artifacts["mlp"]
    x = mlp.model.inputs["forward"][0].numpy()

    async def run(pool: RuntimePool) -> None:
        await pool.infer_async(mlp.sha256, "forward", [x], mlp.path)
        (worker,) = pool.workers.live
        os.kill(worker.process.pid, signal.SIGSTOP)  # alive, never answers
        pool.request_timeout_s = 0.5  # not before: a loaded machine loads slowly
        with pytest.raises(WorkerTimeoutError, match="did not finish"):
            await pool.infer_async(mlp.sha256, "forward", [x], mlp.path)
        pool.request_timeout_s = 120
        # No worker is idle now: this waits on the loop until the respawn thread hands
        # the replacement over.
        result = await pool.infer_async(mlp.sha256, "forward", [x], mlp.path)
        assert result.outputs[0].shape == (1, 4)

    with RuntimePool(1, 1 << 26, tmp_path, request_timeout_s=120) as pool:
        asyncio.run(run(pool))
        assert pool.stats.worker_timeouts == 1 and pool.stats.worker_restarts == 1
