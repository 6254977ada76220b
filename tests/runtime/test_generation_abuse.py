"""Uploaded chat templates that ask for unbounded work (red-team pass): Jinja's sandbox
allows ``'x' * 10**10``, a string doubled in a loop and nested ``range(100000)`` loops. In a
real runtime worker each fails only its request, with a clear error, within the render's
memory, size and time budgets; the same worker serves the next request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pteforge.children.limits import memory_figure
from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.runtime import RuntimePool
from pteforge.runtime.errors import TokenizerError, WorkerCrashedError
from pteforge.runtime.text_codec import MAX_RENDERED_CHARS, RENDER_MEMORY_BYTES
from tests.generation.lm_builder import LmFiles, pte_greedy
from tests.runtime.lm_calls import generated, sha256_of

pytestmark = pytest.mark.zoo  # builds tiny LMs (cached per machine by lm_builder)

HOSTILE = {
    "{{ 'x' * 10**10 }}": f"needs more than {RENDER_MEMORY_BYTES >> 20} MiB",
    "{% set s = namespace(v='x') %}{% for i in range(40) %}{% set s.v = s.v ~ s.v %}"
    "{% endfor %}{{ s.v }}": f"needs more than {RENDER_MEMORY_BYTES >> 20} MiB",
    "{{ '%10000000000s' | format('x') }}": f"needs more than {RENDER_MEMORY_BYTES >> 20} MiB",
    "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}": (
        f"renders over {MAX_RENDERED_CHARS} characters"
    ),
}


@pytest.mark.parametrize("template", list(HOSTILE))
def test_a_template_asking_for_unbounded_work_fails_only_its_request(
    gen_pool: RuntimePool, lm: LmFiles, tmp_path: Path, template: str
) -> None:
    (worker,) = gen_pool.workers.live
    hostile = tmp_path / "hostile_config.json"
    hostile.write_text(json.dumps({"chat_template": template}))
    chat = [{"role": "user", "content": "hi"}]
    with pytest.raises(TokenizerError, match=f"the chat template failed: it {HOSTILE[template]}"):
        generated(gen_pool, lm, hostile, messages=chat, max_tokens=4)
    grown = memory_figure("VmHWM", Path(f"/proc/{worker.process.pid}/status"))
    assert grown < memory_figure("VmRSS", Path(f"/proc/{worker.process.pid}/status")) + (
        RENDER_MEMORY_BYTES
    )
    assert gen_pool.workers.live == {worker}  # not replaced: it answered and serves on
    ids = lm.encode("hi")
    events = generated(
        gen_pool, lm, lm.tokenizer_config, prompt_ids=ids, max_tokens=4, temperature=0
    )
    assert [t for e in events for t in e.token_ids] == pte_greedy(lm.pte, ids, 4, lm.eos_ids)


def test_a_backtracking_pre_tokenizer_fails_only_its_request(
    gen_pool: RuntimePool, lm: LmFiles, tmp_path: Path
) -> None:
    """A tokenizer.json whose Split pre-tokenizer is ``(a+)+$``: Oniguruma stops the search
    at its retry limit (in under a second), and the tokenizers library panics, which Python
    sees as a BaseException that ``except Exception`` let through the worker."""
    from tokenizers import Regex, Tokenizer, pre_tokenizers

    tokenizer = Tokenizer.from_file(str(lm.tokenizer_json))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("(a+)+$"), "isolated")
    hostile = tmp_path / "tokenizer.json"
    tokenizer.save(str(hostile))
    (worker,) = gen_pool.workers.live

    async def encode() -> list[GenerationEvent]:
        request = GenerationRequest(prompt="a" * 40 + "b", max_tokens=4)  # within the context
        stream = gen_pool.generate_async(
            sha256_of(lm.pte),
            lm.pte,
            request,
            tokenizer=(sha256_of(hostile), hostile),
            scope="project-a",
        )
        return [event async for event in stream]

    with pytest.raises(TokenizerError, match=r"the tokenizer failed on the prompt: .*retry-limit"):
        asyncio.run(encode())
    assert gen_pool.workers.live == {worker}


def test_a_normalizer_expanding_the_prompt_costs_its_worker_not_the_host(
    gen_pool: RuntimePool, lm: LmFiles, tmp_path: Path
) -> None:
    """A tokenizer.json whose normalizer replaces each space with 100,000 characters: a
    prompt of 60 spaces became 6 million tokens in the runtime worker, 2.4 GB of a process
    that has no memory limit (500 spaces: the host's memory). Encoding may now take 512 MiB
    and 4 KiB a character: the library's allocation fails past that and it aborts the worker,
    which the pool replaces; the next request is served."""
    document = json.loads(lm.tokenizer_json.read_text())
    document["normalizer"] = {
        "type": "Replace",
        "pattern": {"String": " "},
        "content": " a" * 50000,
    }
    hostile = tmp_path / "tokenizer.json"
    hostile.write_text(json.dumps(document))

    async def encode() -> list[GenerationEvent]:
        stream = gen_pool.generate_async(
            sha256_of(lm.pte),
            lm.pte,
            GenerationRequest(prompt=" " * 60, max_tokens=4),  # within the context's characters
            tokenizer=(sha256_of(hostile), hostile),
            scope="project-expanding-normalizer",  # its crash is charged to it alone
        )
        return [event async for event in stream]

    with pytest.raises(WorkerCrashedError, match=r"memory allocation of \d+ bytes failed"):
        asyncio.run(encode())
    ids = lm.encode("hi")
    events = generated(gen_pool, lm, prompt_ids=ids, max_tokens=4, temperature=0)
    assert [t for e in events for t in e.token_ids] == pte_greedy(lm.pte, ids, 4, lm.eos_ids)
