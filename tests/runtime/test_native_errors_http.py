"""/v2 errors carry the native runtime's own log lines of that request, and name the
ExecuTorch error code: a real embedding model over a real socket, on the session's pool."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from tests.models import embedding_programs
from tests.runtime.conftest import Server
from tests.runtime.helpers import Compiled, compile_pte

AUTH = {"Authorization": "Bearer tok-a"}


@pytest.fixture(scope="module")
def embedding(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    """``nn.Embedding(32, 4)`` compiled, served as ``emb``; half of its bytes as ``cut``."""
    model = embedding_programs()
    root = tmp_path_factory.mktemp("native-errors")
    compiled = compile_pte(model, root / "emb.pte")
    data = compiled.path.read_bytes()[: compiled.path.stat().st_size // 2]
    cut = Path(root / "cut.pte")
    cut.write_bytes(data)
    server.resolver.add("project-a", "emb", compiled, as_path=True)
    truncated = Compiled(cut, hashlib.sha256(data).hexdigest(), model)
    server.resolver.add("project-a", "cut", truncated, as_path=True)
    return compiled


def _infer(server: Server, model: str, tokens: list[int]) -> httpx.Response:
    body = {"inputs": [{"name": "input_0", "datatype": "INT64", "shape": [1, len(tokens)],
                        "data": tokens}]}  # fmt: skip
    return httpx.post(f"{server.url}/v2/models/{model}/infer", json=body, headers=AUTH)


def test_an_out_of_range_token_names_the_index_and_the_code(
    server: Server, embedding: Compiled
) -> None:
    response = _infer(server, "emb.forward", [1, 99, 3])
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "99 >= weight.size(0) 32" in error and "InvalidArgument" in error, error
    assert error.startswith("method 'forward' failed"), error
    assert "\x1b" not in error


def test_each_error_carries_only_its_own_requests_lines(
    server: Server, embedding: Compiled
) -> None:
    for token in range(40, 46):  # enough requests that every worker serves several
        bad = _infer(server, "emb.forward", [1, token, 3])
        assert bad.status_code == 422, bad.text
        error = bad.json()["error"]
        assert f"{token} >= weight.size(0) 32" in error, error
        assert error.count(">= weight.size(0)") == 1, error
        good = _infer(server, "emb.forward", [1, 2, 3])
        assert good.status_code == 200, good.text
        assert "runtime log" not in good.text and "weight.size" not in good.text


def test_a_truncated_program_names_the_error_code(server: Server, embedding: Compiled) -> None:
    response = _infer(server, "cut.forward", [1, 2, 3])
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "InvalidProgram" in error and "runtime log" in error, error
    assert _infer(server, "emb.forward", [1, 2, 3]).status_code == 200


def test_a_crash_carries_what_the_worker_last_logged(server: Server) -> None:
    body = {"inputs": [{"name": "input_0", "datatype": "FP32", "shape": [1, 16],
                        "data": [0.0] * 16}]}  # fmt: skip
    crashed = httpx.post(f"{server.url}/v2/models/crash.forward/infer", json=body, headers=AUTH)
    assert crashed.status_code == 422, crashed.text
    error = crashed.json()["error"]
    assert "crashed the runtime twice" in error and "\nruntime log:\n" in error, error
