"""A tiny Llama exported with upstream's ``export_llama`` (KV cache, ``use_sdpa_with_kv_cache``
and its ``llama::`` custom operators, XNNPACK, each recipe of :data:`RECIPES`), served
through ``/v1/completions`` by a real ``pteforge serve`` and the unmodified ``openai`` client.

The artifact is described as an LM on upload, and greedy answers, streamed and not, carry
exactly the tokens of the same ``.pte``'s in-process greedy loop; for fp32 those equal
eager PyTorch (upstream's ``Transformer`` on the same checkpoint) as well.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
import torch

from tests.generation import lm_upstream
from tests.generation.lm_builder import LmFiles
from tests.server.lm_serving import deploy_lm
from tests.server.service import ServiceProcess

pytestmark = pytest.mark.zoo

PROMPT = "The quick brown fox"
MAX_TOKENS = 12
RECIPES: tuple[str | None, ...] = (None, "8da4w")
"""The export recipes served here (None: fp32; ``8da4w``: int8 dynamic activations, int4
weights, whose greedy tokens are checked against the .pte only, not eager)."""


@pytest.fixture(scope="module")
def client(service: ServiceProcess) -> openai.OpenAI:
    assert service.admin_token
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=service.admin_token, max_retries=0)


@pytest.fixture(scope="module", params=RECIPES, ids=lambda q: q or "fp32")
def upstream(
    request: pytest.FixtureRequest, admin: httpx.Client, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, LmFiles]:
    """The upstream-exported LM of one recipe, deployed with its tokenizer."""
    quantization: str | None = request.param
    lm = lm_upstream.build_upstream_llama(tmp_path_factory.mktemp("upstream"), quantization)
    return deploy_lm(admin, lm, model=f"upstream-llama-{quantization or 'fp32'}"), lm


def test_the_upstream_export_is_described(
    admin: httpx.Client, upstream: tuple[str, LmFiles]
) -> None:
    model, lm = upstream
    versions = admin.get(f"/v1/models/{model}").raise_for_status().json()["versions"]
    artifact_id = versions[0]["artifact_id"]
    artifact = admin.get(f"/v1/artifacts/{artifact_id}").raise_for_status().json()
    generation = artifact["generation"]
    assert generation["convention"] == "executorch_llm_runner"
    assert generation["method"] == "forward"
    assert (generation["max_seq_len"], generation["eos_ids"]) == (lm.max_seq_len, lm.eos_ids)
    assert generation["metadata"]["use_sdpa_with_kv_cache"] is True


def test_greedy_completions_are_the_pte_tokens(
    client: openai.OpenAI, upstream: tuple[str, LmFiles]
) -> None:
    model, lm = upstream
    prompt_ids = lm.encode(PROMPT)
    expected = lm_upstream.pte_greedy(lm, prompt_ids, MAX_TOKENS)
    if "8da4w" not in model:
        assert expected == lm_upstream.eager_greedy(lm, prompt_ids, MAX_TOKENS)
    arguments: dict[str, Any] = {
        "max_tokens": MAX_TOKENS, "temperature": 0, "extra_body": {"return_token_ids": True},
    }  # fmt: skip
    whole = client.completions.create(model=model, prompt=PROMPT, **arguments)
    assert whole.choices[0].to_dict()["token_ids"] == expected
    assert whole.choices[0].text == lm.decode(expected)
    stream = client.completions.create(model=model, prompt=prompt_ids, stream=True, **arguments)
    chunks = [chunk.choices[0] for chunk in stream if chunk.choices]
    assert [t for c in chunks for t in c.to_dict().get("token_ids", [])] == expected
    assert "".join(c.text or "" for c in chunks) == lm.decode(expected)


def test_echo_scores_the_prompt_as_eager(
    client: openai.OpenAI, upstream: tuple[str, LmFiles]
) -> None:
    """How lm-evaluation-harness asks for a text's log-likelihood (``echo``, ``logprobs``,
    no new token), on a ``forward`` that answers the last position's logits only."""
    model, lm = upstream
    prompt_ids = lm.encode(PROMPT)
    answer = client.completions.create(
        model=model, prompt=[prompt_ids], echo=True, logprobs=1, max_tokens=0, temperature=0
    )
    choice = answer.choices[0]
    assert choice.text == lm.decode(prompt_ids) and choice.finish_reason == "length"
    assert answer.usage is not None and answer.usage.completion_tokens == 0
    logprobs = choice.logprobs
    assert logprobs is not None and logprobs.token_logprobs is not None
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None  # type: ignore[index]
    assert len(logprobs.token_logprobs) == len(prompt_ids)
    if "8da4w" in model:
        return  # its logits are the quantized program's, not eager's
    with torch.no_grad():
        for i in range(1, len(prompt_ids)):
            eager = lm.eager(torch.tensor([prompt_ids[:i]]))[0].reshape(-1)
            expected = torch.log_softmax(eager.double(), dim=-1)[prompt_ids[i]]
            assert logprobs.token_logprobs[i] == pytest.approx(float(expected), abs=1e-3), i
