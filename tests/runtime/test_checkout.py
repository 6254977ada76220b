"""Fair hand-out of idle workers (``Checkout``): waiters take turns by scope (project), so
one project's backlog does not queue another project's request behind all of it.

Ordering only, never timing: the unit tests hold every item and return them one at a time;
the end-to-end tests hold the one worker of a real pool while two projects queue on it
(requests, and generations in sessions that live on that worker)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from pteforge.contracts.generation import GenerationRequest
from pteforge.runtime import RuntimePool
from pteforge.runtime.checkout import DEFAULT_SCOPE, Checkout
from tests.generation.lm_builder import LmFiles
from tests.runtime.helpers import Compiled, MemoryResolver, build_app, serve
from tests.server.service import wait_until

# (name, scope) in the order the callers queue up, and the order they are served in.
FLOOD = [("A1", "a"), ("A2", "a"), ("A3", "a"), ("A4", "a"), ("A5", "a"), ("B1", "b")]
FLOOD_SERVED = ["A1", "B1", "A2", "A3", "A4", "A5"]
THREE = [("A1", "a"), ("A2", "a"), ("A3", "a"), ("B1", "b"), ("B2", "b"), ("C1", DEFAULT_SCOPE)]
THREE_SERVED = ["A1", "B1", "C1", "A2", "B2", "A3"]


@dataclass
class _Caller:
    """A caller of the tests' checkouts (``Caller``): ``start`` notes who was served."""

    start: Callable[[Any], None]
    scope: str = DEFAULT_SCOPE
    takes: Callable[[Any], bool] | None = None


def _queued(checkout: Checkout[Any], count: int) -> Callable[[], bool]:
    """Whether ``count`` callers wait on ``checkout`` now, whatever their scopes."""
    return lambda: sum(checkout.waiting().values()) == count


def _served_by_threads(callers: list[tuple[str, str]]) -> list[str]:
    """Queue blocking callers in order, then return one item at a time: who got each."""
    checkout: Checkout[int] = Checkout()
    served: list[str] = []

    def caller(name: str, scope: str) -> None:
        assert checkout.get(60, _Caller(lambda item: served.append(name), scope)) is not None

    threads = [threading.Thread(target=caller, args=c, daemon=True) for c in callers]
    for queued, thread in enumerate(threads, 1):
        thread.start()
        wait_until(_queued(checkout, queued), 60, "the caller to queue", every=0.01)
    for item in range(len(callers)):
        checkout.put(item)  # a thread waiter is started in the returning thread
        assert len(served) == item + 1
    for thread in threads:
        thread.join(60)
    return served


async def _until(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` on the event loop (other tasks run meanwhile) for up to 60 s."""
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


async def _served_by_coroutines(callers: list[tuple[str, str]]) -> list[str]:
    """``_served_by_threads`` with asyncio callers, all on this loop."""
    checkout: Checkout[int] = Checkout()
    served: list[str] = []
    tasks = []
    for queued, (name, scope) in enumerate(callers, 1):

        def start(item: int, name: str = name) -> None:
            served.append(name)

        tasks.append(asyncio.create_task(checkout.get_async(60, _Caller(start, scope))))
        await _until(_queued(checkout, queued), "the caller to queue")
    for item in range(len(callers)):
        checkout.put(item)  # on the waiters' own loop: started right here
        assert len(served) == item + 1
    assert set(await asyncio.gather(*tasks)) == set(range(len(callers)))
    return served


def test_a_flooding_scope_gets_one_turn_ahead_of_another_scope() -> None:
    assert _served_by_threads(FLOOD) == FLOOD_SERVED
    assert asyncio.run(_served_by_coroutines(FLOOD)) == FLOOD_SERVED


def test_scopes_take_turns_in_the_order_they_came_fifo_within_each() -> None:
    assert _served_by_threads(THREE) == THREE_SERVED
    assert asyncio.run(_served_by_coroutines(THREE)) == THREE_SERVED


def test_a_caller_for_one_item_waits_for_its_turn_and_a_withdrawn_one_keeps_no_turn() -> None:
    """A1 (any item) came before 'mine' (item 'w' only): 'w' goes to A1's scope, whose turn
    it is; 'v' then goes to no one ('mine' wants 'w'), and the next 'w' to 'mine'."""
    checkout: Checkout[str] = Checkout()
    served: list[str] = []
    assert checkout.get(0, _Caller(served.append, "b")) is None  # timed out: withdrawn
    a1, mine = _Caller(lambda i: served.append("A1"), "a"), _Caller(lambda i: served.append("mine"))
    threads = [
        threading.Thread(target=checkout.get, args=(60, a1), daemon=True),
        threading.Thread(target=checkout.get, args=(60, mine, "w"), daemon=True),
    ]
    threads[0].start()
    wait_until(_queued(checkout, 1), 60, "the general caller", every=0.01)
    threads[1].start()
    wait_until(_queued(checkout, 2), 60, "the caller for 'w'", every=0.01)
    assert checkout.waiting() == {"a": 1, DEFAULT_SCOPE: 1}
    checkout.put("w")
    checkout.put("v")
    assert served == ["A1"] and checkout.idle() == ["v"]
    checkout.put("w")
    assert served == ["A1", "mine"]
    for thread in threads:
        thread.join(60)


def test_callers_for_one_item_take_turns_with_other_scopes() -> None:
    """Project a's session turns all wait for its sessions' worker 'w', then b's request
    for any worker: b's is served second, not after a's whole backlog (it was last); within
    a scope, its caller for 'w' comes before its general ones."""
    checkout: Checkout[str] = Checkout()
    served: list[str] = []
    callers = [("A1", "a", "w"), ("A2", "a", "w"), ("A3", "a", None), ("B1", "b", None)]
    callers += [("A4", "a", "w")]
    threads = []
    for queued, (name, scope, item) in enumerate(callers, 1):

        def start(got: str, name: str = name) -> None:
            served.append(name)

        threads.append(
            threading.Thread(target=checkout.get, args=(60, _Caller(start, scope), item))
        )
        threads[-1].start()
        wait_until(_queued(checkout, queued), 60, f"{name} to queue", every=0.01)
    for _ in callers:
        checkout.put("w")
    for thread in threads:
        thread.join(60)
    assert served == ["A1", "B1", "A2", "A4", "A3"]


def _fresh(item: str) -> bool:
    return not item.startswith("held")


def test_a_caller_that_takes_only_some_items_skips_the_others() -> None:
    """A crashed request's retry takes only a worker that holds no other project's
    sessions: the idle 'held' is left for others, as is a returned one, until one fits; a
    caller behind it that takes any item is served meanwhile."""
    checkout: Checkout[str] = Checkout()
    checkout.put("held")
    served: list[tuple[str, str]] = []
    picky = threading.Thread(
        target=checkout.get,
        args=(60, _Caller(lambda item: served.append(("retry", item)), "a", _fresh)),
        daemon=True,
    )
    picky.start()
    wait_until(_queued(checkout, 1), 60, "the retry to queue", every=0.01)
    assert checkout.idle() == ["held"]
    checkout.put("held2")  # no fit: idle, though the retry's scope has the turn
    assert served == [] and checkout.idle() == ["held", "held2"]
    assert checkout.get(0, _Caller(lambda item: served.append(("any", item)), "b")) == "held"
    checkout.put("fresh")
    picky.join(60)
    assert served == [("any", "held"), ("retry", "fresh")] and checkout.idle() == ["held2"]


def test_a_real_pool_serves_two_projects_in_turns(
    tmp_path: Path, artifacts: dict[str, Compiled]
) -> None:
    """Project a queues three requests on the pool's one worker, then project b one: b's is
    answered second, not fourth (the /v2 routes pass the caller's project as ``scope``)."""
    mlp = artifacts["mlp"]
    x = [mlp.model.inputs["forward"][0].numpy()]
    answered: list[str] = []

    async def infer(pool: RuntimePool, name: str, scope: str) -> np.ndarray:
        result = await pool.infer_async(mlp.sha256, "forward", x, mlp.path, scope=scope)
        answered.append(name)  # before the loop runs anything else: in order of service
        return result.outputs[0]

    async def run(pool: RuntimePool) -> list[np.ndarray]:
        checkout = pool.workers.checkout
        held = checkout.get(60, _Caller(lambda worker: None))  # the pool's one worker, idle
        assert held is not None
        calls = []
        for queued, (name, scope) in enumerate(FLOOD[:3] + FLOOD[5:], 1):
            calls.append(asyncio.create_task(infer(pool, name, scope)))
            await _until(_queued(checkout, queued), f"{name} to queue")
        assert checkout.waiting() == {"a": 3, "b": 1}
        checkout.put(held)
        return await asyncio.gather(*calls)

    with RuntimePool(1, 1 << 26, tmp_path) as pool:
        expected = pool.infer(mlp.sha256, "forward", x, mlp.path).outputs[0]  # described, local
        outputs = asyncio.run(run(pool))
    assert answered == ["A1", "B1", "A2", "A3"]
    for output in outputs:
        np.testing.assert_array_equal(output, expected)


def test_the_v2_route_queues_a_request_in_its_callers_project(
    tmp_path: Path, artifacts: dict[str, Compiled]
) -> None:
    """While the one worker is held, each project's /v2 requests wait in its own scope."""
    body = {"inputs": [{"name": "input_0", "datatype": "FP32", "shape": [1, 16],
                        "data": [0.5] * 16}]}  # fmt: skip
    resolver = MemoryResolver()
    for project in ("project-a", "project-b"):
        resolver.add(project, "mlp", artifacts["mlp"], as_path=True)
    replies: list[int] = []

    def post(url: str, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        replies.append(httpx.post(url, json=body, headers=headers, timeout=60).status_code)

    with RuntimePool(1, 1 << 26, tmp_path) as pool, serve(build_app(resolver, pool)[0]) as url:
        url = f"{url}/v2/models/mlp.forward/infer"
        post(url, "tok-a")  # described and local: later requests go straight to the queue
        held = pool.workers.checkout.get(60, _Caller(lambda worker: None))
        assert held is not None
        callers = [
            threading.Thread(target=post, args=(url, t)) for t in ("tok-a", "tok-a", "tok-b")
        ]
        for queued, caller in enumerate(callers, 1):
            caller.start()
            wait_until(
                _queued(pool.workers.checkout, queued), 60, "the request to queue", every=0.01
            )
        assert pool.workers.checkout.waiting() == {"project-a": 2, "project-b": 1}
        pool.workers.checkout.put(held)
        for caller in callers:
            caller.join(60)
    assert replies == [200] * 4


# A's turns, each in a session of its own on the pool's one worker, then B's plain one.
SESSION_TURNS = [("A1", "turns-a", "s1"), ("A2", "turns-a", "s2"), ("A3", "turns-a", "s3")]
SESSION_TURNS_SERVED = ["A1", "B1", "A2", "A3"]


@pytest.mark.zoo  # the tiny LM (built once per machine)
def test_a_real_pool_serves_another_projects_generation_between_session_turns(
    gen_pool: RuntimePool, lm: LmFiles
) -> None:
    """Project a's sessions all live on the one worker, so its turns wait for that worker
    in particular; project b's generation, queued last, is served second (it was last, all
    of a's turns first, when a caller for one worker always came before the others)."""
    served: list[str] = []

    async def generate(name: str, scope: str, session: str | None) -> None:
        request = GenerationRequest(prompt="1 2 3", max_tokens=2, temperature=0, session=session)
        tokenizer = (hashlib.sha256(lm.tokenizer_json.read_bytes()).hexdigest(), lm.tokenizer_json)
        pte = hashlib.sha256(lm.pte.read_bytes()).hexdigest()
        stream = gen_pool.generate_async(pte, lm.pte, request, tokenizer=tokenizer, scope=scope)
        async for _ in stream:  # the worker is held for the whole generation
            if name not in served:
                served.append(name)

    async def run() -> None:
        for _, scope, session in SESSION_TURNS:  # opened: described, files local
            await generate("opening", scope, session)
        checkout = gen_pool.workers.checkout
        held = checkout.get(60, _Caller(lambda worker: None))  # the pool's one worker, idle
        assert held is not None
        served.clear()
        calls = []
        for queued, turn in enumerate([*SESSION_TURNS, ("B1", "turns-b", None)], 1):
            calls.append(asyncio.create_task(generate(*turn)))
            await _until(_queued(checkout, queued), f"{turn[0]} to queue")
        assert checkout.waiting() == {"turns-a": 3, "turns-b": 1}
        checkout.put(held)
        await asyncio.gather(*calls)

    asyncio.run(run())
    assert served == SESSION_TURNS_SERVED
