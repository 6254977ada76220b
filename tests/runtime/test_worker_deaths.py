"""Worker deaths are the server's fault: found before use, retried once, restarts back off."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from pteforge.runtime import RuntimePool
from pteforge.runtime.errors import PoolUnavailableError, WorkerCrashedError
from pteforge.runtime.supervisor import RestartPolicy
from pteforge.server.inference.statuses import status_of
from tests.runtime.conftest import Server
from tests.runtime.helpers import Compiled


def _wait(check: object, what: str, deadline_s: float = 60.0) -> None:
    assert callable(check)
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _expected(mlp: Compiled) -> np.ndarray:
    with torch.no_grad():
        return mlp.model.eager["forward"](*mlp.model.inputs["forward"]).numpy()  # type: ignore[no-any-return]


def test_a_worker_killed_while_idle_is_replaced_before_a_request_reaches_it(
    tmp_path: Path, artifacts: dict[str, Compiled]
) -> None:
    mlp = artifacts["mlp"]
    x = [mlp.model.inputs["forward"][0].numpy()]
    with RuntimePool(1, 1 << 26, tmp_path) as pool:
        pool.infer(mlp.sha256, "forward", x, mlp.path)
        (worker,) = pool.workers.live
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.join(5)
        result = pool.infer(mlp.sha256, "forward", x, mlp.path)  # waits for the replacement
        np.testing.assert_allclose(result.outputs[0], _expected(mlp), rtol=1e-4, atol=1e-4)
        assert pool.stats.worker_crashes == 0 and pool.stats.worker_restarts == 1
        assert worker not in pool.workers.live


def test_the_sweep_replaces_a_dead_idle_worker_without_a_request(
    tmp_path: Path, artifacts: dict[str, Compiled]
) -> None:
    with RuntimePool(1, 1 << 26, tmp_path) as pool:
        (worker,) = pool.workers.live
        os.kill(worker.process.pid, signal.SIGKILL)
        _wait(lambda: pool.stats.worker_restarts == 1, "the sweep to notice")
        _wait(lambda: len(pool.workers.live) == 1 and pool.ready, "the replacement")


def test_a_worker_killed_mid_request_is_retried_on_a_fresh_one(
    tmp_path: Path, artifacts: dict[str, Compiled]
) -> None:
    mlp = artifacts["mlp"]
    x = [mlp.model.inputs["forward"][0].numpy()]

    async def run(pool: RuntimePool) -> np.ndarray:
        await pool.infer_async(mlp.sha256, "forward", x, mlp.path)
        (worker,) = pool.workers.live
        os.kill(worker.process.pid, signal.SIGSTOP)  # it takes the request, never answers
        call = asyncio.create_task(pool.infer_async(mlp.sha256, "forward", x, mlp.path))
        while pool.workers.checkout.idle():  # until the request holds the worker
            await asyncio.sleep(0.01)
        os.kill(worker.process.pid, signal.SIGKILL)
        return (await call).outputs[0]

    with RuntimePool(1, 1 << 26, tmp_path) as pool:
        output = asyncio.run(run(pool))
        assert pool.stats.worker_crashes == 1 and pool.stats.worker_restarts == 1
    np.testing.assert_allclose(output, _expected(mlp), rtol=1e-4, atol=1e-4)


def test_kill_9_an_idle_worker_then_infer_over_http(
    server: Server, pool: RuntimePool, artifacts: dict[str, Compiled]
) -> None:
    body = {"inputs": [{"name": "input_0", "datatype": "FP32", "shape": [1, 16],
                        "data": [0.5] * 16}]}  # fmt: skip
    headers = {"Authorization": "Bearer tok-a"}
    url = f"{server.url}/v2/models/mlp.forward/infer"
    assert httpx.post(url, json=body, headers=headers).status_code == 200
    restarts = pool.stats.worker_restarts
    victim = pool.workers.checkout.idle()[0]
    os.kill(victim.process.pid, signal.SIGKILL)
    victim.process.join(5)
    for _ in range(2 * pool.size):  # every worker is handed a request
        reply = httpx.post(url, json=body, headers=headers)
        assert reply.status_code == 200, reply.text
    assert pool.stats.worker_restarts == restarts + 1
    _wait(lambda: len(pool.workers.live) == pool.size, "the pool to be whole again")


def test_restarts_back_off_and_give_up_with_a_clear_error(
    tmp_path: Path, artifacts: dict[str, Compiled]
) -> None:
    mlp = artifacts["mlp"]
    x = [mlp.model.inputs["forward"][0].numpy()]
    policy = RestartPolicy(attempts=3, first_delay_s=0.01, max_delay_s=0.05, retry_after_s=3600)
    with RuntimePool(1, 1 << 26, tmp_path, restart_policy=policy) as pool:
        # from now on every worker fails to start (its weight-cache library is missing)
        pool.workers.config = replace(pool.workers.config, weight_cache_library="/nonexistent.so")
        (worker,) = pool.workers.live
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.join(5)
        with pytest.raises(PoolUnavailableError, match=r"could not be restarted \(3 attempts"):
            pool.infer(mlp.sha256, "forward", x, mlp.path)  # waits, then is told
        assert not pool.ready
        started = time.monotonic()
        with pytest.raises(PoolUnavailableError, match="could not be restarted"):
            pool.infer(mlp.sha256, "forward", x, mlp.path)
        assert time.monotonic() - started < 5  # refused at once, not after a timeout


def test_server_faults_are_503_with_retry_after_and_input_faults_4xx() -> None:
    from pteforge.runtime.errors import CrashingInputError

    assert status_of(WorkerCrashedError("crashed; retry failed")) == (503, {"Retry-After": "1"})
    unavailable = PoolUnavailableError("none", retry_after_s=12.5)  # the pool's policy says
    assert status_of(unavailable) == (503, {"Retry-After": "13"})
    assert status_of(CrashingInputError("twice")) == (422, {})
