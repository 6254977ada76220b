"""OpenAI's ``logit_bias``, ``presence_penalty`` and ``frequency_penalty`` in the worker's
decode loop: greedy tokens equal a plain eager PyTorch loop that applies OpenAI's formula,
and a bias for a token the model does not have is refused before any work."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pteforge.contracts.generation import GenerationRequest
from pteforge.runtime import RuntimePool
from pteforge.runtime.errors import InvalidInputError
from pteforge.runtime.sampling import LogitShaping, Sampler
from tests.generation.lm_builder import LmFiles
from tests.runtime.lm_calls import generated

pytestmark = pytest.mark.zoo  # builds a tiny LM (cached per machine by lm_builder)

PROMPT = "def generate(prompt"


def _tokens(pool: RuntimePool, lm: LmFiles, **fields: object) -> list[int]:
    events = generated(pool, lm, prompt=PROMPT, temperature=0, **fields)
    return [t for event in events for t in event.token_ids]


def _eager_shaped_greedy(
    lm: LmFiles, steps: int, bias: dict[int, float], presence: float, frequency: float
) -> list[int]:
    """Greedy over eager ``transformers`` logits (the whole sequence each step, no cache),
    with OpenAI's ``mu[j] + bias[j] - c[j] * frequency - (c[j] > 0) * presence``."""
    ids = list(lm.encode(PROMPT))
    counts: dict[int, int] = {}
    out: list[int] = []
    with torch.no_grad():
        for _ in range(steps):
            logits = lm.eager(torch.tensor([ids])).logits[0, -1].double()  # type: ignore[operator]
            for token, value in bias.items():
                logits[token] += value
            for token, seen in counts.items():
                logits[token] -= seen * frequency + presence
            out.append(int(logits.argmax()))
            if out[-1] in lm.eos_ids:
                break
            counts[out[-1]] = counts.get(out[-1], 0) + 1
            ids.append(out[-1])
    return out


@pytest.mark.parametrize(
    ("presence", "frequency"),
    [(2.0, 0.0), (0.0, 1.5), (-2.0, 0.0)],
    ids=["presence", "frequency", "encouraged"],
)
def test_penalties_equal_openais_formula_on_eager(
    gen_pool: RuntimePool, lm: LmFiles, presence: float, frequency: float
) -> None:
    plain = _tokens(gen_pool, lm, max_tokens=10)
    shaped = _tokens(
        gen_pool, lm, max_tokens=10, presence_penalty=presence, frequency_penalty=frequency
    )
    assert shaped == _eager_shaped_greedy(lm, 10, {}, presence, frequency)
    if presence > 0 or frequency > 0:
        assert shaped != plain  # the plain greedy text repeats a token: the penalty tells


def test_a_bias_moves_the_choice_as_on_eager(gen_pool: RuntimePool, lm: LmFiles) -> None:
    first = _tokens(gen_pool, lm, max_tokens=1)[0]
    banned = _tokens(gen_pool, lm, max_tokens=6, logit_bias={first: -100})
    assert banned[0] != first
    assert banned == _eager_shaped_greedy(lm, 6, {first: -100.0}, 0.0, 0.0)
    wanted = next(t for t in range(lm.eos_ids[0] + 1, 100) if t not in lm.eos_ids)
    assert _tokens(gen_pool, lm, max_tokens=4, logit_bias={wanted: 100}) == [wanted] * 4


def test_a_bias_outside_the_vocabulary_is_refused(gen_pool: RuntimePool, lm: LmFiles) -> None:
    with pytest.raises(InvalidInputError, match="logit_bias has token id 1000000"):
        _tokens(gen_pool, lm, max_tokens=2, logit_bias={1_000_000: 5})


def test_no_shaping_is_none_and_the_logits_are_not_written() -> None:
    assert LogitShaping.of(GenerationRequest(prompt="a"), 4) is None
    request = GenerationRequest(prompt="a", logit_bias={2: 3.0}, frequency_penalty=1.0)
    shaping = LogitShaping.of(request, 4)
    sampler = Sampler(0.0, 1.0, None, shaping)
    logits = np.array([1.0, 4.0, 2.0, 0.0], np.float32)
    # shaped: [1, 4, 5, 0], then 2's logit falls by 1 each time it is chosen (ties: lowest id)
    assert [sampler.pick(logits) for _ in range(4)] == [2, 1, 2, 1]
    assert logits.tolist() == [1.0, 4.0, 2.0, 0.0]
