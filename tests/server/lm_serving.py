"""A tiny LM served as a model version with its tokenizer, and the greedy tokens it must
give: shared by the text generation tests (fixtures ``lm`` and ``deployed`` in conftest)."""

from __future__ import annotations

from pathlib import Path

import httpx
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tests.generation.lm_builder import LmFiles, eager_greedy, pte_greedy
from tests.generation.lm_tokenizer import BOS, CHAT_TEMPLATE
from tests.server.model_names import deploy

MODEL = "tiny-llama"
"""The model name the tiny Llama is deployed under (version 1)."""


def _files(*paths: tuple[str, Path]) -> dict[str, tuple[str, bytes]]:
    return {field: (path.name, path.read_bytes()) for field, path in paths}


def deploy_lm(
    admin: httpx.Client, lm: LmFiles, model: str = MODEL, ptd: tuple[Path, Path] | None = None
) -> str:
    """``lm`` as version 1 of ``model``, with its tokenizer and chat template (``ptd``: a
    ``.pte`` of it with its constants in a ``.ptd``, and that ``.ptd``, instead of its own)."""
    parts = [("pte", lm.pte)] if ptd is None else [("pte", ptd[0]), ("ptd", ptd[1])]
    artifact = admin.post("/v1/artifacts", files=_files(*parts))
    assert artifact.status_code == 201, artifact.text
    deploy(admin, model, artifact.json()["id"])
    parts = _files(("tokenizer", lm.tokenizer_json), ("tokenizer_config", lm.tokenizer_config))
    tokenizer = admin.put(f"/v1/models/{model}/versions/1/tokenizer", files=parts)
    assert tokenizer.status_code == 201, tokenizer.text
    return model


def greedy_reference(lm: LmFiles, prompt_ids: list[int], max_tokens: int) -> list[int]:
    """The greedy tokens of ``lm``'s ``.pte`` in process, checked against eager PyTorch."""
    tokens = pte_greedy(lm.pte, prompt_ids, max_tokens, lm.eos_ids)
    assert tokens == eager_greedy(lm, prompt_ids, max_tokens)
    return tokens


def chat_prompt(lm: LmFiles, messages: list[dict[str, str]]) -> list[int]:
    """The prompt ids of a chat, rendered by the tokenizer config's template."""
    template = ImmutableSandboxedEnvironment().from_string(CHAT_TEMPLATE)
    rendered = template.render(messages=messages, bos_token=BOS, add_generation_prompt=True)
    return lm.encode(rendered.removeprefix(BOS))  # the encoder puts BOS first itself
