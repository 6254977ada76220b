"""``PTEFORGE_METRICS_TOKEN`` (red-team pass): /metrics answers every project's per-model
series (model names, artifact ids, request rates) to whoever reaches it; with a token set it
answers only that bearer token. The /v2 routes in an app of their own over a real pool."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from pteforge.runtime import RuntimePool
from pteforge.server.inference import build_inference_router, new_inference_state
from tests.runtime.helpers import MemoryResolver, bearer_auth

SECRET = "metrics-9f2c"


def _get(pool: RuntimePool, token: str | None, headers: dict[str, str]) -> tuple[int, str]:
    state = new_inference_state(
        MemoryResolver(), pool, bearer_auth, CollectorRegistry(), metrics_token=token
    )
    app = FastAPI()
    app.include_router(build_inference_router(state))
    with TestClient(app) as client:
        answer = client.get("/metrics", headers=headers)
    return answer.status_code, answer.text


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Authorization": f"Basic {SECRET}"}, 401),
        ({"Authorization": f"Bearer {SECRET}x"}, 401),
        ({"Authorization": f"Bearer {SECRET}"}, 200),
    ],
)
def test_metrics_need_the_token_once_set(
    pool: RuntimePool, headers: dict[str, str], status: int
) -> None:
    code, text = _get(pool, SECRET, headers)
    assert code == status, text
    assert SECRET not in text
    assert ("pteforge_runtime_worker_restarts_total" in text) == (status == 200)


def test_metrics_need_no_token_by_default(pool: RuntimePool) -> None:
    assert _get(pool, None, {})[0] == 200
