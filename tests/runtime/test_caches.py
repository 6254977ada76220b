"""The short-lived caches that keep database lookups off the /v2 hot path, with a manual
clock: entries serve until their TTL passes, then revocation and deletion take effect."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.requests import Request

from pteforge.runtime import RuntimePool
from pteforge.server.auth.cache import TtlCache
from pteforge.server.auth.dependencies import Principal, cached_principal
from pteforge.server.errors import UnauthorizedError
from pteforge.server.inference import build_inference_router, new_inference_state
from pteforge.storage import default_sqlite_url, open_store
from tests.runtime.helpers import Compiled, MemoryResolver, bearer_auth, serve


@dataclass
class ManualClock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def _request(authorization: str) -> Request:
    return Request({"type": "http", "headers": [(b"authorization", authorization.encode())]})


def test_entries_expire_after_their_ttl() -> None:
    clock = ManualClock()
    cache: TtlCache[str, int] = TtlCache(2.0, clock=clock)
    cache.put("a", 1)
    clock.now += 1.999
    assert cache.get("a") == 1
    clock.now += 0.001
    assert cache.get("a") is None and len(cache) == 0


def test_size_is_bounded_oldest_first_and_zero_ttl_disables() -> None:
    cache: TtlCache[int, int] = TtlCache(10.0, max_entries=2)
    for key in range(3):
        cache.put(key, key)
    assert (cache.get(0), cache.get(1), cache.get(2)) == (None, 1, 2)
    off: TtlCache[int, int] = TtlCache(0.0)
    off.put(1, 1)
    assert off.get(1) is None
    with pytest.raises(ValueError, match="max_entries"):
        TtlCache(1.0, max_entries=0)
    cache.clear()  # what a model changed through this server does to /v2's resolutions
    assert (cache.get(1), cache.get(2), len(cache)) == (None, None, 0)


def test_a_revoked_token_is_refused_once_the_ttl_passes(tmp_path: Path) -> None:
    store = open_store(default_sqlite_url(tmp_path / "home"))
    try:
        with store.transaction() as tx:
            project = tx.projects.get_or_create("p")
            issued = tx.tokens.create(project.id, "t")
        clock = ManualClock()
        require = cached_principal(store, TtlCache(1.0, clock=clock))
        request = _request(f"Bearer {issued.plaintext}")

        principal = asyncio.run(require(request))
        assert principal == Principal(project_id=project.id, token_id=issued.token.id)
        with store.transaction() as tx:
            assert tx.tokens.revoke(project.id, issued.token.id)
        assert asyncio.run(require(request)) == principal  # served from the cache
        clock.now += 1.0
        with pytest.raises(UnauthorizedError, match="revoked"):
            asyncio.run(require(request))
        with pytest.raises(UnauthorizedError, match="invalid"):
            asyncio.run(require(_request("Bearer nope")))
        with pytest.raises(UnauthorizedError, match=r"its scheme is .Basic."):
            asyncio.run(require(_request("Basic abc")))
    finally:
        store.close()


def test_a_deleted_artifact_is_404_once_the_ttl_passes(
    pool: RuntimePool, artifacts: dict[str, Compiled]
) -> None:
    resolver, clock = MemoryResolver(), ManualClock()
    resolver.add("project-a", "mlp", artifacts["mlp"], as_path=True)
    app = FastAPI()
    app.include_router(
        build_inference_router(
            new_inference_state(resolver, pool, bearer_auth, CollectorRegistry(), clock=clock)
        )
    )
    x = artifacts["mlp"].model.inputs["forward"][0].numpy()
    tensor = {"name": "input_0", "datatype": "FP32", "shape": list(x.shape),
              "data": x.reshape(-1).tolist()}  # fmt: skip
    headers = {"Authorization": "Bearer tok-a"}
    with serve(app) as url:

        def infer() -> int:
            path = f"{url}/v2/models/mlp.forward/infer"
            return httpx.post(path, json={"inputs": [tensor]}, headers=headers).status_code

        assert infer() == 200
        del resolver.artifacts[("project-a", "mlp")]
        assert infer() == 200  # still cached
        clock.now += 1.0
        assert infer() == 404
