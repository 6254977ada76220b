"""Generation reads its limits from the program's runner metadata as ExecuTorch's runner
does: a ``.pte`` without ``get_eos_ids`` ends at the tokenizer's EOS, and the context is
``get_max_context_len`` where the program has it (new-user pass). Each test runs a copy of
the tiny Llama whose Program table was edited, in the package's one-worker pool."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.runtime import RuntimePool
from tests.generation.lm_builder import LmFiles, pte_greedy
from tests.generation.lm_tokenizer import IM_END

pytestmark = pytest.mark.zoo  # builds tiny LMs (cached per machine by lm_builder)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tokens(events: list[GenerationEvent]) -> list[int]:
    return [t for e in events for t in e.token_ids]


def _rewritten(pte: Path, target: Path, edit: Callable[[Any], None]) -> Path:
    """A copy of ``pte`` whose Program table ``edit`` changed (segments kept)."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    program = deserialize_pte_binary(pte.read_bytes())
    edit(program.program)
    target.write_bytes(bytes(serialize_pte_binary(program, extract_delegate_segments=True)))
    return target


def _without_method(pte: Path, name: str, target: Path) -> Path:
    """A copy of ``pte`` without method ``name``."""

    def drop(program: Any) -> None:
        program.execution_plan = [p for p in program.execution_plan if p.name != name]

    return _rewritten(pte, target, drop)


def test_without_get_eos_ids_the_tokenizers_eos_ends_the_text(
    gen_pool: RuntimePool, lm: LmFiles, tmp_path: Path
) -> None:
    """ExecuTorch's runner ends a text at the tokenizer's EOS when the program has no
    get_eos_ids; the worker read no EOS at all and ran on to max_tokens (new-user pass)."""
    pte = _without_method(lm.pte, "get_eos_ids", tmp_path / "no-eos.pte")
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"eos_token": IM_END}))
    im_end = [lm.encode(IM_END)[-1]]
    expected = pte_greedy(lm.pte, lm.encode("Paris"), 40, im_end)
    assert expected[-1] == im_end[0] and len(expected) < 40  # the prompt ends early

    async def collect() -> list[GenerationEvent]:
        request = GenerationRequest(prompt="Paris", max_tokens=40, temperature=0)
        tokenizer = (_sha(lm.tokenizer_json), lm.tokenizer_json)
        stream = gen_pool.generate_async(
            _sha(pte),
            pte,
            request,
            tokenizer=tokenizer,
            tokenizer_config=(_sha(config), config),
            scope="project-a",
        )
        return [event async for event in stream]

    events = asyncio.run(collect())
    assert _tokens(events) == expected
    assert events[-1].finish_reason == "stop"


def test_optimum_executorchs_get_eos_id_ends_the_text(
    gen_pool: RuntimePool, lm: LmFiles, tmp_path: Path
) -> None:
    """optimum-executorch names its one EOS ``get_eos_id``: a program with only that ends
    there, without a tokenizer config naming it (the worker read no EOS, so ran on)."""
    im_end = lm.encode(IM_END)[-1]

    def one_eos_id(program: Any) -> None:
        (plan,) = [p for p in program.execution_plan if p.name == "get_eos_ids"]
        plan.name, plan.outputs = "get_eos_id", plan.outputs[:1]
        plan.values[plan.outputs[0]].val.int_val = im_end

    pte = _rewritten(lm.pte, tmp_path / "eos-id.pte", one_eos_id)
    expected = pte_greedy(lm.pte, lm.encode("Paris"), 40, [im_end])
    assert expected[-1] == im_end and len(expected) < 40

    async def collect() -> list[GenerationEvent]:
        request = GenerationRequest(prompt="Paris", max_tokens=40, temperature=0)
        blob = (_sha(lm.tokenizer_json), lm.tokenizer_json)
        stream = gen_pool.generate_async(_sha(pte), pte, request, tokenizer=blob, scope="a")
        return [event async for event in stream]

    events = asyncio.run(collect())
    assert _tokens(events) == expected and events[-1].finish_reason == "stop"


def test_the_context_is_get_max_context_len_when_the_program_has_it(
    gen_pool: RuntimePool, lm: LmFiles, tmp_path: Path
) -> None:
    """upstream's export_llama writes get_max_seq_len (the most tokens one call takes) and
    get_max_context_len (the KV cache); a prompt longer than the first but within the
    second was refused as longer than the model's context (new-user pass)."""

    def shorter_calls(program: Any) -> None:
        (plan,) = [p for p in program.execution_plan if p.name == "get_max_seq_len"]
        plan.values[0].val.int_val = 8

    pte = _rewritten(lm.pte, tmp_path / "seq8.pte", shorter_calls)
    prompt = "Hello, world! How are you today?"
    ids = lm.encode(prompt)
    assert 8 < len(ids) < lm.max_seq_len  # over one call's 8 tokens, within the cache's 64

    async def collect() -> list[GenerationEvent]:
        request = GenerationRequest(prompt=prompt, max_tokens=12, temperature=0)
        blob = (_sha(lm.tokenizer_json), lm.tokenizer_json)
        stream = gen_pool.generate_async(_sha(pte), pte, request, tokenizer=blob, scope="a")
        return [event async for event in stream]

    assert _tokens(asyncio.run(collect())) == pte_greedy(lm.pte, ids, 12, lm.eos_ids)
