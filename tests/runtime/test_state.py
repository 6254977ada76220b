"""Stateless requests start from the program's initial state and never see another's state.

Real ``.pte`` files with a mutable buffer (``Counter``: ``n += 1; return x + n``), compiled
the three ways a program can carry its buffers: unnamed (the default), named
(``emit_mutable_buffer_names``), and named with their initial values stored.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest

from pteforge.runtime import RuntimePool
from pteforge.runtime.state import MethodState, read_program_state
from tests.runtime.conftest import Server
from tests.runtime.helpers import Compiled
from tests.runtime.stateful_compile import StatefulPte, compile_stateful
from tests.runtime.stateful_models import counter_programs

VARIANTS = {
    "unnamed": {"names": False, "share": False},
    "named": {"names": True, "share": True},
    "initialized": {"names": True, "share": True, "initial": ["n"]},
}


@pytest.fixture(scope="module")
def counters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StatefulPte]:
    root = tmp_path_factory.mktemp("counters")
    return {
        name: compile_stateful(
            counter_programs(5.0 if name == "initialized" else 0.0),
            root / f"counter-{name}.pte",
            xnnpack=False,
            **options,  # type: ignore[arg-type]
        )
        for name, options in VARIANTS.items()
    }


def _initial(name: str) -> float:
    return 6.0 if name == "initialized" else 1.0  # x = 0 plus the buffer after one step


def test_state_is_read_from_the_flatbuffer(
    counters: dict[str, StatefulPte], artifacts: dict[str, Compiled]
) -> None:
    states = {name: read_program_state(c.path) for name, c in counters.items()}
    assert states["unnamed"] is not None and states["named"] is not None
    unnamed, named = states["unnamed"].method("forward"), states["named"].method("forward")
    assert unnamed == MethodState((), 1, unnamed.planned_bytes)
    assert named == MethodState(("n",), 0, named.planned_bytes)
    assert named.resettable
    assert 0 < named.planned_bytes <= states["named"].planned_bytes  # one method of the copy
    assert "method 'forward' plans" in states["named"].largest_plan()
    for compiled in artifacts.values():  # the stateless test programs pay nothing
        state = read_program_state(compiled.path)
        assert state is not None and not state.stateful, compiled.path


@pytest.mark.parametrize("name", list(VARIANTS))
def test_identical_stateless_calls_give_identical_answers(
    pool: RuntimePool, counters: dict[str, StatefulPte], name: str
) -> None:
    compiled = counters[name]
    x = [np.zeros(1, np.float32)]
    answers = [
        float(pool.infer(compiled.sha256, "forward", x, compiled.path).outputs[0][0])
        for _ in range(2 * pool.size + 1)  # every worker serves it more than once
    ]
    assert answers == [_initial(name)] * len(answers)


def test_two_projects_do_not_share_state_over_http(
    server: Server, counters: dict[str, StatefulPte]
) -> None:
    compiled = counters["unnamed"]
    for project, artifact_id in [("project-a", "counter"), ("project-b", "counter-b")]:
        server.resolver.add(project, artifact_id, compiled, as_path=True)  # type: ignore[arg-type]
    body = {"inputs": [{"name": "input_0", "datatype": "FP32", "shape": [1], "data": [0.0]}]}
    answers = []
    for token, artifact_id in [("tok-a", "counter"), ("tok-b", "counter-b")] * 3:
        reply = httpx.post(
            f"{server.url}/v2/models/{artifact_id}.forward/infer",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert reply.status_code == 200, reply.text
        answers.append(reply.json()["outputs"][0]["data"][0])
    assert answers == [1.0] * 6


def test_a_stateful_method_reloaded_per_request_keeps_others_cheap(
    tmp_path: Path, counters: dict[str, StatefulPte], artifacts: dict[str, Compiled]
) -> None:
    """The unnamed counter runs on a fresh instance each time; the stateless MLP keeps
    using its cached one (its calls are cache hits and return the same numbers)."""
    mlp = artifacts["mlp"]
    x = [t.numpy() for t in mlp.model.inputs["forward"]]
    counter = counters["unnamed"]
    with RuntimePool(1, 64 << 20, tmp_path) as single:
        first = single.infer(mlp.sha256, "forward", x, mlp.path).outputs[0]
        for _ in range(3):
            out = single.infer(counter.sha256, "forward", [np.zeros(1, np.float32)], counter.path)
            assert float(out.outputs[0][0]) == 1.0
        again = single.infer(mlp.sha256, "forward", x, mlp.path)
    assert again.cache_hit
    np.testing.assert_array_equal(again.outputs[0], first)
