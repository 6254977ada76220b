"""A project whose requests keep crashing runtime workers is refused past its crash budget.

Real pool, real workers, a real crashing ``.pte`` (``crashing_copy``), over /v2 on a
socket: project A's crashes are counted, past the budget its requests answer 429 with
``Retry-After`` before they reach a worker (its good models too) until the window lets them
go; project B is served all along, and B's session on another worker survives A's crashing
request, whose retry goes to a worker holding no other project's sessions.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from pteforge.runtime import RuntimePool
from pteforge.runtime.checkout import DEFAULT_SCOPE
from pteforge.runtime.crash_budget import CrashBudget, CrashLimits
from pteforge.runtime.errors import CrashBudgetError
from pteforge.server.grpc_api.status import grpc_status
from tests.runtime.helpers import Compiled, MemoryResolver, build_app, crashing_copy, serve
from tests.runtime.stateful_compile import StatefulPte, compile_stateful
from tests.runtime.stateful_models import counter_programs

LIMITS = CrashLimits(crashes=3, window_s=600)


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> StatefulPte:
    root = tmp_path_factory.mktemp("crash-budget-counter")
    return compile_stateful(counter_programs(), root / "counter.pte", xnnpack=False)


@dataclass
class Site:
    url: str
    pool: RuntimePool
    now: list[float]  # the budget's clock, moved by the test


@pytest.fixture
def site(artifacts: dict[str, Compiled], counter: StatefulPte, tmp_path: Path) -> Iterator[Site]:
    """Two workers, a crash budget of ``LIMITS`` on a clock the test moves, behind /v2."""
    crash = crashing_copy(artifacts["mlp"])
    with RuntimePool(2, 1 << 26, tmp_path, crash_limits=LIMITS) as pool:
        now = [1000.0]
        pool.calls.budget.clock = lambda: now[0]
        pool.describe(crash.sha256, crash.path)  # described now, so the method crashes later
        resolver = MemoryResolver()
        resolver.add("project-a", "crash", crash, as_path=True)
        resolver.add("project-a", "mlp", artifacts["mlp"], as_path=True)
        resolver.add("project-b", "mlp", artifacts["mlp"], as_path=True)
        resolver.add("project-b", "counter", counter, as_path=True)  # type: ignore[arg-type]
        app, _ = build_app(resolver, pool)
        with serve(app) as url:
            yield Site(url, pool, now)


def _infer(site: Site, token: str, model: str, **parameters: Any) -> httpx.Response:
    shape = [1] if model.startswith("counter") else [1, 16]
    count = shape[-1]
    entry = {"name": "input_0", "datatype": "FP32", "shape": shape, "data": [0.0] * count}
    body = {"inputs": [entry], "parameters": parameters}
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.post(f"{site.url}/v2/models/{model}/infer", json=body, headers=headers)


def _count(reply: httpx.Response) -> float:
    """The counter's answer (its calls so far in the session)."""
    assert reply.status_code == 200, reply.text
    return float(reply.json()["outputs"][0]["data"][0])


def test_a_project_past_its_crash_budget_is_refused_and_others_are_not(site: Site) -> None:
    assert _count(_infer(site, "tok-b", "counter.forward", sequence_id=5, sequence_start=True)) == 1
    first = _infer(site, "tok-a", "crash.forward")  # the other worker, then a fresh one
    assert first.status_code == 422 and "crashed the runtime twice" in first.text, first.text
    assert _count(_infer(site, "tok-b", "counter.forward", sequence_id=5)) == 2  # survived
    second = _infer(site, "tok-a", "crash.forward")  # its third crash; the retry is refused
    assert second.status_code == 429, second.text
    assert second.headers["Retry-After"] == "600"
    message = second.json()["error"]
    assert "crashed or hung 3 runtime workers in the last 600s" in message
    assert "PTEFORGE_RUNTIME_CRASHES_PER_PROJECT=3" in message and "in 600s" in message
    assert site.pool.stats.worker_crashes == 3
    refused = _infer(site, "tok-a", "mlp.forward")  # a good model too, before any worker
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "600"
    assert site.pool.stats.worker_crashes == 3
    assert _infer(site, "tok-b", "mlp.forward").status_code == 200  # another project
    site.now[0] += 599
    assert _infer(site, "tok-a", "mlp.forward").headers["Retry-After"] == "1"
    site.now[0] += 1  # the oldest crash leaves the window
    assert _infer(site, "tok-a", "mlp.forward").status_code == 200


def test_a_request_waiting_when_its_project_uses_up_its_budget_is_refused_at_the_hand_over(
    tmp_path: Path, artifacts: dict[str, Compiled]
) -> None:
    """Requests queued before the budget ran out do not each get a worker to crash."""
    mlp = artifacts["mlp"]
    x = [mlp.model.inputs["forward"][0].numpy()]

    async def run(pool: RuntimePool) -> None:
        infer = partial(pool.infer_async, mlp.sha256, "forward", x, mlp.path)
        (worker,) = pool.workers.live
        os.kill(worker.process.pid, signal.SIGSTOP)  # it takes the request, never answers
        running = asyncio.create_task(infer(scope="project-a"))
        waiting = asyncio.create_task(infer(scope="project-a"))
        deadline = time.monotonic() + 60
        while pool.workers.checkout.waiting() != {"project-a": 1}:  # behind the running one
            assert time.monotonic() < deadline, "the second request never queued"
            await asyncio.sleep(0.01)
        os.kill(worker.process.pid, signal.SIGKILL)  # its death uses up A's budget
        for call in (running, waiting):  # no retry; the queued one is handed the replacement
            with pytest.raises(CrashBudgetError, match="crashed or hung 1 runtime workers"):
                await call
        await infer(scope="project-b")  # which it gave back, unused

    with RuntimePool(1, 1 << 26, tmp_path, crash_limits=CrashLimits(1, 600)) as pool:
        pool.describe(mlp.sha256, mlp.path)
        asyncio.run(run(pool))
        assert pool.stats.worker_crashes == 1 and pool.stats.requests == 1


def test_the_refusal_is_resource_exhausted_over_grpc() -> None:
    budget = CrashBudget(CrashLimits(crashes=1, window_s=60), clock=lambda: 0.0)
    budget.charge("project-a")
    with pytest.raises(CrashBudgetError) as refused:
        budget.check("project-a")
    assert grpc_status(refused.value) == (grpc.StatusCode.RESOURCE_EXHAUSTED, str(refused.value))
    budget.check("project-b")  # another project's budget is its own


def test_internal_calls_and_a_pool_without_limits_are_never_refused() -> None:
    budget = CrashBudget(CrashLimits(crashes=1, window_s=60))
    budget.charge(DEFAULT_SCOPE)  # no project: refusing it would refuse every project
    budget.check(DEFAULT_SCOPE)
    unlimited = CrashBudget(None)
    unlimited.charge("project-a")
    unlimited.check("project-a")
