"""A language model whose weights are in a ``.ptd`` (program-data separation, as CUDA and
LoRA exports write them) generates through ``/v1/completions`` the greedy tokens of its eager
model, and upstream's ``TextLLMRunner`` loads the same pair with ``data_path``."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from tests.generation.lm_builder import LmFiles, eager_greedy
from tests.program_data import separated_lm
from tests.server.lm_serving import deploy_lm
from tests.server.service import ServiceProcess

pytestmark = [pytest.mark.server, pytest.mark.zoo]
PROMPT = "The quick brown fox"
MAX_TOKENS = 10


def test_a_separated_lm_generates_its_eager_greedy_tokens(
    service: ServiceProcess, admin: httpx.Client, lm: LmFiles, tmp_path: Path
) -> None:
    from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner

    pte, ptd = separated_lm(lm, tmp_path)
    # upstream's runner loads the pair (its generate's token_callback cannot be compared:
    # it raises UnicodeDecodeError on a byte-level piece of a multi-byte character)
    runner = TextLLMRunner(str(pte), str(lm.tokenizer_json), data_path=str(ptd))
    runner.prefill(PROMPT, GenerationConfig(echo=False, num_bos=0))
    model = deploy_lm(admin, lm, "tiny-llama-ptd", ptd=(pte, ptd))
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=service.admin_token)
    answer = client.completions.create(
        model=model,
        prompt=PROMPT,
        max_tokens=MAX_TOKENS,
        temperature=0,
        extra_body={"return_token_ids": True},
    )
    expected = eager_greedy(lm, lm.encode(PROMPT), MAX_TOKENS)
    assert answer.choices[0].to_dict()["token_ids"] == expected
