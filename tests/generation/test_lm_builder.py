"""The tiny LMs of ``lm_builder``: runner metadata in the ``.pte``, greedy tokens of the
``.pte`` equal eager ``generate``, a tokenizer whose vocabulary is the model's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.generation.lm_builder import (
    FAMILIES,
    LmFiles,
    build_tiny_lm,
    eager_greedy,
    pte_greedy,
)

pytestmark = pytest.mark.zoo


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> LmFiles:
    return build_tiny_lm("llama", tmp_path_factory.mktemp("llama"))


def test_metadata_methods_answer_what_was_written(llama: LmFiles) -> None:
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(llama.pte)
    assert set(llama.metadata) | {"forward"} == set(program.method_names)
    for name, value in llama.metadata.items():
        answer = program.load_method(name).execute([])
        assert list(answer) == (value if isinstance(value, list) else [value]), name
    assert llama.metadata["get_vocab_size"] == 384


def test_upstream_runner_prefills_it(llama: LmFiles) -> None:
    from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner

    runner = TextLLMRunner(str(llama.pte), str(llama.tokenizer_json))
    runner.prefill("The quick brown fox", GenerationConfig(echo=False, num_bos=1))


@pytest.fixture(scope="module", params=FAMILIES)
def lm(request: pytest.FixtureRequest) -> LmFiles:
    """Each family of the zoo's runner-convention LMs (Llama, Qwen2, GPT-2)."""
    family = request.param
    return build_tiny_lm(family)


@pytest.mark.parametrize("text", ["The quick brown fox", "Café 日本語 😀"])
def test_pte_greedy_equals_eager(lm: LmFiles, text: str) -> None:
    prompt = lm.encode(text)
    assert prompt[0] == lm.bos_id
    want = eager_greedy(lm, prompt, 24)
    assert pte_greedy(lm.pte, prompt, 24, lm.eos_ids) == want
    assert len(want) == 24 or want[-1] in lm.eos_ids
    # the weights' scale keeps greedy text from repeating one token
    assert len(set(want)) > 2 or want[-1] in lm.eos_ids


def test_tokenizer_is_byte_level_with_partial_characters(llama: LmFiles) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(llama.tokenizer_json))
    assert tokenizer.get_vocab_size() == llama.metadata["get_vocab_size"]
    pieces = [tokenizer.decode([i]) for i in range(tokenizer.get_vocab_size())]
    assert any("\ufffd" in piece for piece in pieces)  # a piece of a multi-byte character
    assert llama.decode(llama.encode("naïve 😀")) == "naïve 😀"


def test_files_are_copied_to_the_workdir(llama: LmFiles, tmp_path: Path) -> None:
    again = build_tiny_lm("llama", tmp_path)
    assert again.pte.read_bytes() == llama.pte.read_bytes()
    assert again.tokenizer_config.is_file() and again.pte.parent == tmp_path
