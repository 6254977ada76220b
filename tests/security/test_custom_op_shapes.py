"""Hostile positions through upstream's ``llama::update_cache`` and ``llama::custom_sdpa``
(the operators of ``export_llama`` programs), over ``/v2`` of the real service.

A ``.pte`` on those operators (:mod:`tests.security.kv_cache_program`) is uploaded as is,
so nothing pteforge compiled stands between the caller and the kernels; ExecuTorch drops
the ``torch._check`` bounds of the exported position anyway. Each hostile ``input_pos``
must be refused with a 4xx naming what is wrong, the server must survive it, and the next
valid request must answer eager PyTorch's numbers (a runtime worker killed on the way is
replaced). Upstream's kernels refuse a position past the cache (``update_cache``: an
error; ``custom_sdpa`` alone: an abort, which kills the worker); they do not check a
negative one, which ``update_cache`` writes before the cache buffer, so pteforge refuses
negative integer inputs of such methods (``runtime/kernel_guards.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch

from tests.security import kv_cache_program as kv
from tests.server.helpers import wait_job
from tests.server.service import ServiceProcess

Q, K, V = (torch.randn(kv.SHAPE, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3))
PAST_END = {
    "just_past_the_end": kv.CACHE_LEN,
    "far_past_the_end": 1_000_000,
    "int64_max": 2**63 - 1,
}
NEGATIVE = {"minus_one": -1, "minus_cache_len": -kv.CACHE_LEN, "far_below": -(2**40)}


@pytest.fixture(scope="module")
def artifact(secure_admin: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The id of the uploaded ``.pte``."""
    pte = kv.build(tmp_path_factory.mktemp("kv") / "kv_cache.pte")
    answer = secure_admin.post("/v1/artifacts", files={"pte": (pte.name, pte.read_bytes())})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _tensor(name: str, value: torch.Tensor) -> dict[str, Any]:
    datatype = "INT64" if value.dtype == torch.int64 else "FP32"
    return {
        "name": name, "shape": list(value.shape), "datatype": datatype,
        "data": value.flatten().tolist(),
    }  # fmt: skip


def _infer(client: httpx.Client, model: str, *tensors: torch.Tensor) -> httpx.Response:
    inputs = [_tensor(f"input_{i}", t) for i, t in enumerate(tensors)]
    return client.post(f"/v2/models/{model}/infer", json={"inputs": inputs})


def _step(client: httpx.Client, artifact: str, pos: int) -> httpx.Response:
    return _infer(client, f"{artifact}.forward", Q, K, V, torch.tensor([pos]))


def _assert_valid_step_is_eager(client: httpx.Client, artifact: str) -> None:
    """A valid step answers eager PyTorch's output (causal at 0: exactly ``V``)."""
    answer = _step(client, artifact, 0)
    assert answer.status_code == 200, answer.text
    (output,) = answer.json()["outputs"]
    expected = kv.eager_step(Q, K, V, 0)
    assert output["shape"] == list(expected.shape)
    np.testing.assert_allclose(np.array(output["data"]), expected.flatten().numpy(), rtol=1e-6)


def _error(answer: httpx.Response, status: int) -> str:
    """The message of an Open Inference Protocol error answer (``{"error": "..."}``)."""
    assert answer.status_code == status, answer.text
    message = answer.json()["error"]
    assert isinstance(message, str), answer.text
    return message


def test_a_valid_step_answers_eager_pytorch(
    secure_service: ServiceProcess, secure_admin: httpx.Client, artifact: str
) -> None:
    _assert_valid_step_is_eager(secure_admin, artifact)


def _refusal(position: int) -> tuple[int, tuple[str, ...]]:
    """The status a hostile ``position`` is answered with and what its message names: past
    the cache, the kernel's own error (422); negative, pteforge's check before it runs (400)."""
    if position < 0:
        return 400, ("'input_3'", f"negative value {position}")
    return 422, ("start_pos", "cache size at dim 1: 8")


@pytest.mark.parametrize("case", sorted(PAST_END | NEGATIVE))
def test_a_hostile_position_is_refused_and_the_next_step_answers(
    case: str, secure_service: ServiceProcess, secure_admin: httpx.Client, artifact: str
) -> None:
    position = (PAST_END | NEGATIVE)[case]
    status, named = _refusal(position)
    message = _error(_step(secure_admin, artifact, position), status)
    assert all(part in message for part in named), message
    assert secure_service.alive()
    _assert_valid_step_is_eager(secure_admin, artifact)


def test_positions_and_shapes_off_the_signature_are_refused(
    secure_admin: httpx.Client, artifact: str
) -> None:
    more = torch.zeros(1, 2, *kv.SHAPE[2:])
    answer = _infer(secure_admin, f"{artifact}.forward", Q, more, V, torch.tensor([0]))
    message = _error(answer, 400)
    assert "'input_1'" in message and "shape" in message, message
    wrong = torch.tensor([0.0])
    message = _error(_infer(secure_admin, f"{artifact}.forward", Q, K, V, wrong), 400)
    assert "'input_3'" in message and "INT64" in message, message
    _assert_valid_step_is_eager(secure_admin, artifact)


def test_an_aborting_kernel_kills_only_its_worker(
    secure_service: ServiceProcess, secure_admin: httpx.Client, artifact: str
) -> None:
    """``custom_sdpa`` alone past the cache aborts its process: the request is answered
    422 naming the method (it crashed a worker twice), the workers are replaced."""
    answer = _infer(secure_admin, f"{artifact}.attend", Q, torch.tensor([kv.CACHE_LEN]))
    assert "attend" in _error(answer, 422)
    assert secure_service.alive()
    zeros = _infer(secure_admin, f"{artifact}.attend", Q, torch.tensor([0]))
    assert zeros.status_code == 200, zeros.text
    assert zeros.json()["outputs"][0]["data"] == [0.0] * Q.numel()  # the cache is empty
    negative = _infer(secure_admin, f"{artifact}.attend", Q, torch.tensor([-1]))
    assert "negative value -1" in _error(negative, 400)
    _assert_valid_step_is_eager(secure_admin, artifact)


def test_a_profile_job_refuses_a_negative_position_too(
    secure_admin: httpx.Client, artifact: str
) -> None:
    """A profile job runs the caller's inputs in a lowering child: the same check applies
    there, and the job fails naming the input."""
    inputs = [_tensor(f"input_{i}", t) for i, t in enumerate((Q, K, V, torch.tensor([-1])))]
    body = {"artifact_id": artifact, "method": "forward", "iterations": 1, "inputs": inputs}
    answer = secure_admin.post("/v1/profile-jobs", json=body)
    assert answer.status_code == 202, answer.text
    job = wait_job(secure_admin, answer.json()["id"])
    assert job["status"] == "failed", job
    assert "'input_3'" in job["error"]["message"], job["error"]
    assert "negative value -1" in job["error"]["message"], job["error"]


def test_a_computed_position_runs_nowhere(
    secure_service: ServiceProcess, secure_admin: httpx.Client, tmp_path: Path
) -> None:
    """A program writing at ``input_pos[0] - 1`` would write before its cache at position
    0, which no input check can refuse: the method is refused (422), naming why."""
    pte = kv.build_writer("shifted", tmp_path / "shifted.pte")
    answer = secure_admin.post("/v1/artifacts", files={"pte": (pte.name, pte.read_bytes())})
    assert answer.status_code == 201, answer.text
    model = f"{answer.json()['id']}.forward"
    message = _error(_infer(secure_admin, model, Q, K, V, torch.tensor([1])), 422)
    assert "cannot run here" in message and "computed by the method" in message, message
    assert secure_service.alive()
