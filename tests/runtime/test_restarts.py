"""Replacing a lost worker whose replacements cannot start: bounded attempts, a clear error.

Every replacement here is a real worker process that exits at once (its weight-cache
library does not exist); only ``WorkerProcess.spawn`` is wrapped, to count the starts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pteforge.runtime import RuntimePool
from pteforge.runtime.errors import PoolUnavailableError
from pteforge.runtime.processes import Context, WorkerProcess
from pteforge.runtime.supervisor import RestartPolicy
from pteforge.runtime.worker import WorkerConfig
from pteforge.server.inference.statuses import status_of
from tests.runtime.helpers import Compiled

ATTEMPTS = 3
DEADLINE_S = 60.0
RETRY_AFTER_S = 3600  # no second round of restarts within a test


def _until(check: object, what: str) -> None:
    assert callable(check)
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _counting_spawns(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the worker processes started from now on (each really starts)."""
    spawned: list[int] = []
    real = WorkerProcess.spawn

    def spawn(ctx: Context, config: WorkerConfig) -> WorkerProcess:
        worker = real(ctx, config)
        spawned.append(worker.process.pid or 0)
        return worker

    monkeypatch.setattr(WorkerProcess, "spawn", spawn)
    return spawned


def _mlp(artifacts: dict[str, Compiled]) -> tuple[Compiled, list[np.ndarray]]:
    """The small MLP artifact and an input of its ``forward``."""
    mlp = artifacts["mlp"]
    return mlp, [mlp.model.inputs["forward"][0].numpy()]


@contextmanager
def _worker_lost_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_delay_s: float, library: str
) -> Iterator[tuple[RuntimePool, list[int], WorkerProcess]]:
    """A one-worker pool whose worker was just killed and whose replacements cannot start
    (their weight-cache ``library`` does not exist); with the starts counted from then on.
    Restarts back off from ``first_delay_s`` and give up after ``ATTEMPTS``."""
    policy = RestartPolicy(
        ATTEMPTS, first_delay_s, max_delay_s=4 * first_delay_s, retry_after_s=RETRY_AFTER_S
    )
    with RuntimePool(1, 1 << 26, tmp_path / "cache", restart_policy=policy) as pool:
        pool.workers.config = replace(pool.workers.config, weight_cache_library=library)
        spawned = _counting_spawns(monkeypatch)
        (worker,) = pool.workers.live
        os.kill(worker.process.pid or 0, signal.SIGKILL)
        yield pool, spawned, worker


def test_replacements_that_cannot_start_are_bounded_and_answered_with_a_clear_error(
    tmp_path: Path, artifacts: dict[str, Compiled], monkeypatch: pytest.MonkeyPatch
) -> None:
    mlp, x = _mlp(artifacts)
    missing = tmp_path / "missing-shim.so"
    with _worker_lost_for_good(tmp_path, monkeypatch, 0.01, str(missing)) as (pool, spawned, _):
        _until(lambda: pool.workers.failure is not None, "the pool to give up")

        assert len(spawned) == ATTEMPTS  # one round, then no more tries
        failure = str(pool.workers.failure)
        assert f"({ATTEMPTS} attempts in a row failed" in failure
        assert missing.name in failure  # the last start error, as the worker said it
        assert not pool.ready

        with ThreadPoolExecutor(1) as threads:  # a hang fails the test, not the run
            blocking = threads.submit(pool.infer, mlp.sha256, "forward", x, mlp.path)
            with pytest.raises(PoolUnavailableError, match="could not be restarted") as raised:
                blocking.result(timeout=DEADLINE_S)
        assert missing.name in str(raised.value)

        answer = asyncio.wait_for(pool.infer_async(mlp.sha256, "forward", x, mlp.path), DEADLINE_S)
        with pytest.raises(PoolUnavailableError, match="could not be restarted"):
            asyncio.run(answer)

        assert len(spawned) == ATTEMPTS  # refusing requests started no new round
        # clients are told to come back when the pool will try again: its policy's delay
        assert status_of(raised.value) == (503, {"Retry-After": str(RETRY_AFTER_S)})


def test_a_request_waiting_for_a_worker_gets_the_error_when_the_pool_gives_up(
    tmp_path: Path, artifacts: dict[str, Compiled], monkeypatch: pytest.MonkeyPatch
) -> None:
    mlp, x = _mlp(artifacts)
    lost = _worker_lost_for_good(tmp_path, monkeypatch, 0.2, "/nonexistent.so")
    with lost as (pool, spawned, worker):
        worker.process.join(DEADLINE_S)
        pool.sweep()  # notices the dead worker: the restarts begin, the request waits

        async def ask() -> None:
            await pool.infer_async(mlp.sha256, "forward", x, mlp.path)

        with pytest.raises(PoolUnavailableError, match=r"nonexistent\.so"):
            asyncio.run(asyncio.wait_for(ask(), DEADLINE_S))
        assert len(spawned) == ATTEMPTS
