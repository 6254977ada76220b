"""Sessions end to end: stateful programs uploaded, compiled with shared mutable buffers,
and decoded greedily over /v2 with ``tritonclient.http`` sequences, against eager PyTorch.

- A decoder-only LM whose KV cache is registered buffers: ``prefill`` writes the cache that
  ``decode`` then reads, one token per request.
- A Whisper-style model: ``encode`` stores the cross-attention keys/values that ``decode``
  runs against, with its own self-attention cache.
Both are tiny random-weight models; tokens must match eager exactly, logits within 1e-4.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
import tritonclient.http as triton

from pteforge.server.settings import Settings
from tests.models import MultiMethod, save_programs
from tests.runtime.stateful_models import counter_programs, reset_state, whisper_programs
from tests.server.helpers import SHARED_PLAN, compile_files
from tests.server.service import ServiceProcess

STEPS = 8


@pytest.fixture(scope="module")
def whisper(admin: httpx.Client, tmp_path_factory: Any) -> tuple[MultiMethod, str]:
    """The Whisper-style model (``encode`` stores cross-attention keys/values for
    ``decode``), and the artifact it compiles to."""
    model = whisper_programs()
    files = save_programs(model.programs, tmp_path_factory.mktemp("whisper"))
    return model, compile_files(admin, files, "whisper-style", SHARED_PLAN)


class Remote:
    """Calls one artifact's methods over /v2 with tritonclient, inside one sequence."""

    def __init__(self, service: ServiceProcess, admin: httpx.Client, artifact: str) -> None:
        self.client = triton.InferenceServerClient(url=service.url.removeprefix("http://"))
        self.headers = {"Authorization": admin.headers["Authorization"]}
        self.artifact = artifact

    def __call__(self, method: str, *arrays: torch.Tensor, **sequence: Any) -> np.ndarray:
        model = f"{self.artifact}.{method}"
        meta = self.client.get_model_metadata(model, headers=self.headers)
        inputs = []
        for spec, tensor in zip(meta["inputs"], arrays, strict=True):
            array = tensor.numpy()
            entry = triton.InferInput(spec["name"], list(array.shape), spec["datatype"])
            entry.set_data_from_numpy(array, binary_data=True)
            inputs.append(entry)
        result = self.client.infer(model, inputs, headers=self.headers, **sequence)
        return result.as_numpy(meta["outputs"][0]["name"])  # type: ignore[no-any-return]


Step = Callable[..., torch.Tensor]


def greedy(first: Step, decode: Step, start: torch.Tensor, steps: int) -> tuple[list[int], list]:
    """``first`` gives the logits of the first token; ``decode(token, pos)`` each next."""
    logits = [first()]
    tokens = [int(logits[-1][0, -1].argmax())]
    position = int(start)
    for i in range(steps):
        logits.append(decode(torch.tensor([[tokens[-1]]]), torch.tensor([position]), i))
        tokens.append(int(logits[-1][0, -1].argmax()))
        position += 1
    return tokens, logits


def _opened(
    service: ServiceProcess, admin: httpx.Client, compiled: tuple[MultiMethod, str], method: str
) -> tuple[Remote, Any, torch.Tensor]:
    """A ``Remote`` on the compiled artifact, the eager model it came from and the one
    example input of its ``method``."""
    model, artifact = compiled
    (example,) = model.inputs[method]
    return Remote(service, admin, artifact), model.eager[method].model, example  # type: ignore[union-attr]


def _eager_greedy(model: Any, first: Step, start: torch.Tensor) -> tuple[list[int], list]:
    """``greedy`` in eager PyTorch from an empty state: ``first()``, then ``model.decode``."""
    reset_state(model)
    with torch.no_grad():
        return greedy(first, lambda t, p, i: model.decode(t, p), start, STEPS)


def _compare(remote: tuple[list[int], list], eager: tuple[list[int], list]) -> None:
    assert remote[0] == eager[0]
    for got, expected in zip(remote[1], eager[1], strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-4, rtol=1e-4)


def test_lm_prefill_then_decode_in_a_session_matches_eager(
    service: ServiceProcess, admin: httpx.Client, cached_lm: tuple[MultiMethod, str]
) -> None:
    remote, model, prompt = _opened(service, admin, cached_lm, "prefill")
    length = torch.tensor(prompt.shape[1])
    eager = _eager_greedy(model, lambda: model.prefill(prompt), length)

    def step(token: torch.Tensor, pos: torch.Tensor, i: int) -> Any:
        return remote("decode", token, pos, sequence_id=42, sequence_end=i == STEPS - 1)

    first = lambda: remote("prefill", prompt, sequence_id=42, sequence_start=True)  # noqa: E731
    _compare(greedy(first, step, length, STEPS), eager)
    # a stateless decode starts from the empty cache, not from the session's
    stateless = remote("decode", torch.tensor([[1]]), torch.tensor([0]))
    reset_state(model)
    with torch.no_grad():
        expected = model.decode(torch.tensor([[1]]), torch.tensor([0]))
    np.testing.assert_allclose(stateless, expected.numpy(), atol=1e-4, rtol=1e-4)


def test_whisper_encode_then_decode_in_a_session_matches_eager(
    service: ServiceProcess, admin: httpx.Client, whisper: tuple[MultiMethod, str]
) -> None:
    remote, model, features = _opened(service, admin, whisper, "encode")
    start_token = torch.tensor([[1]])

    def eager_first() -> torch.Tensor:
        model.encode(features)
        return model.decode(start_token, torch.tensor([0]))  # type: ignore[no-any-return]

    eager = _eager_greedy(model, eager_first, torch.tensor(1))

    def remote_first() -> Any:
        remote("encode", features, sequence_id="utterance-1", sequence_start=True)
        return remote("decode", start_token, torch.tensor([0]), sequence_id="utterance-1")

    def step(token: torch.Tensor, pos: torch.Tensor, i: int) -> Any:
        end = i == STEPS - 1
        return remote("decode", token, pos, sequence_id="utterance-1", sequence_end=end)

    _compare(greedy(remote_first, step, torch.tensor(1), STEPS), eager)


def test_identical_stateless_calls_to_a_stateful_program_answer_the_same(
    service: ServiceProcess, admin: httpx.Client, tmp_path: Path
) -> None:
    """The issue's reproduction: ``n += 1; return x + n`` compiled with the default plan
    (its buffer unnamed), called three times without a sequence: 1.0 each time."""
    counter = counter_programs()
    files = save_programs(counter.programs, tmp_path)
    remote = Remote(service, admin, compile_files(admin, files, "counter", {}))
    answers = [float(remote("forward", torch.zeros(1))[0]) for _ in range(3)]
    assert answers == [1.0, 1.0, 1.0]


def test_a_dynamic_input_keeps_its_static_dimensions(
    admin: httpx.Client, cached_lm: tuple[MultiMethod, str]
) -> None:
    """``prefill`` takes ``[1, length]``: /v2 says so, and a batch of 0, within the ``.pte``'s
    bound ``[1, max_len]`` but not the program's shape, is refused before it runs."""
    model = f"{cached_lm[1]}.prefill"
    [tokens] = admin.get(f"/v2/models/{model}").raise_for_status().json()["inputs"]
    assert tokens["shape"] == [1, -1]
    empty = {"name": tokens["name"], "datatype": "INT64", "shape": [0, 3], "data": []}
    response = admin.post(f"/v2/models/{model}/infer", json={"inputs": [empty]})
    assert response.status_code == 400, response.text
    assert "matching [1, -1], got [0, 3]" in response.json()["error"]


def test_session_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTEFORGE_SESSION_IDLE_SECONDS", "12.5")
    monkeypatch.setenv("PTEFORGE_SESSION_MAX_PER_PROJECT", "3")
    monkeypatch.setenv("PTEFORGE_SESSION_MEMORY_BYTES", "4096")
    settings = Settings()
    assert settings.session_idle_seconds == 12.5
    assert settings.session_max_per_project == 3
    assert settings.session_memory_bytes == 4096
    assert settings.session_memory_bytes_per_project is None  # half of it, at startup
    monkeypatch.setenv("PTEFORGE_SESSION_MEMORY_BYTES_PER_PROJECT", "1024")
    assert Settings().session_memory_bytes_per_project == 1024
