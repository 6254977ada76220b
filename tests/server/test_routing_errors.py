"""The router's own 404 and 405 name the route (they said 'Not Found' and 'Method Not
Allowed'), in each layer's error shape; no server start: the app without its lifespan."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from fastapi.testclient import TestClient

from pteforge.server.app import create_app
from pteforge.server.settings import Settings


def test_no_route_and_a_wrong_method_are_named(tmp_path: Path) -> None:
    client = TestClient(create_app(Settings(home=tmp_path)))
    v1 = client.get("/v1/nothing")
    assert (v1.status_code, v1.json()["error"]["code"]) == (404, "not_found")
    assert v1.json()["error"]["message"] == (
        "no route GET /v1/nothing; every route is listed at /docs and in docs/http-api.md"
    )
    unload = client.post("/v2/repository/models/m/unload")  # tritonclient's unload_model
    assert unload.status_code == 404
    assert unload.json() == {
        "error": "no route POST /v2/repository/models/m/unload; every route is listed at "
        "/docs and in docs/http-api.md"
    }
    put = client.put("/v1/programs/some-id")
    assert (put.status_code, put.headers["allow"]) == (405, "GET, DELETE")
    assert put.json()["error"]["message"] == "PUT /v1/programs/some-id: the route takes GET, DELETE"


def test_openai_routes_pteforge_lacks_name_those_it_serves(tmp_path: Path) -> None:
    """The unmodified ``openai`` client's call of a route pteforge lacks (a stored response:
    nothing is stored) shows which routes exist."""
    app = TestClient(create_app(Settings(home=tmp_path)))
    client = openai.OpenAI(
        base_url="http://testserver/v1", api_key="any", http_client=app, max_retries=0
    )
    served = "of OpenAI's API pteforge serves only /v1/completions, /v1/chat/completions,"
    with pytest.raises(openai.NotFoundError, match="no route GET /v1/responses/resp_1") as raised:
        client.responses.retrieve("resp_1")
    assert served in raised.value.message
    with pytest.raises(openai.NotFoundError, match=served):
        client.embeddings.create(model="tiny", input="hi")
    assert "OpenAI" not in app.get("/v1/responsesx").json()["error"]["message"]
