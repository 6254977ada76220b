"""Text generation in runtime workers, through ``RuntimePool.generate_async``, on a tiny
real LM (``tests.generation.lm_builder``): greedy tokens equal the same ``.pte``'s
in-process greedy loop and eager PyTorch; sampling repeats with a seed; stop strings,
limits, the context and sessions' KV caches; a closed stream frees its worker."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import signal
import termios
import time
from collections.abc import AsyncGenerator
from multiprocessing import Pipe
from pathlib import Path

import pytest

from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.contracts.runtime_messages import (
    BlobFile,
    CancelledReply,
    CancelRequest,
    GeneratedReply,
    GenerateRequest,
)
from pteforge.runtime import RuntimePool
from pteforge.runtime.errors import (
    ContextLengthError,
    InvalidInputError,
    SessionLimitError,
    WorkerCrashedError,
)
from pteforge.runtime.sessions import SessionLimits
from pteforge.runtime.wire import WORKER_REPLY, decode_message, encode_message
from pteforge.runtime.worker import Executor, WorkerConfig
from tests.generation.lm_builder import Family, LmFiles, build_tiny_lm, eager_greedy, pte_greedy

pytestmark = pytest.mark.zoo  # builds tiny LMs (cached per machine by lm_builder)

PROMPTS = ("def generate(prompt", "Hello, wörld! ☕", "1 2 3 4 5 6")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stream(
    pool: RuntimePool, lm: LmFiles, scope: str = "project-a", **fields: object
) -> AsyncGenerator[GenerationEvent, None]:
    return pool.generate_async(
        _sha(lm.pte),
        lm.pte,
        GenerationRequest.model_validate(fields),
        tokenizer=(_sha(lm.tokenizer_json), lm.tokenizer_json),
        tokenizer_config=(_sha(lm.tokenizer_config), lm.tokenizer_config),
        scope=scope,
    )


def _generate(pool: RuntimePool, lm: LmFiles, **fields: object) -> list[GenerationEvent]:
    async def collect() -> list[GenerationEvent]:
        return [event async for event in _stream(pool, lm, **fields)]

    return asyncio.run(collect())


def _tokens(events: list[GenerationEvent]) -> list[int]:
    return [t for e in events for t in e.token_ids]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_equals_the_in_process_loop_and_eager(
    gen_pool: RuntimePool, lm: LmFiles, prompt: str
) -> None:
    events = _generate(gen_pool, lm, prompt=prompt, max_tokens=24, temperature=0)
    ids = lm.encode(prompt)
    tokens = _tokens(events)
    assert tokens == pte_greedy(lm.pte, ids, 24, lm.eos_ids) == eager_greedy(lm, ids, 24)
    assert "".join(e.text for e in events) == lm.decode(tokens)
    last = events[-1]
    assert [e.finish_reason for e in events[:-1]] == [None] * (len(events) - 1)
    assert last.finish_reason == ("stop" if tokens[-1] in lm.eos_ids else "length")
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (len(ids), len(tokens))
    by_ids = _generate(gen_pool, lm, prompt_ids=ids, max_tokens=24, temperature=0)
    assert _tokens(by_ids) == tokens


@pytest.mark.parametrize(("family", "dynamic"), [("qwen2", True), ("gpt2", True), ("llama", False)])
def test_greedy_equals_for_other_families_and_static_lengths(
    gen_pool: RuntimePool, family: Family, dynamic: bool
) -> None:
    """Qwen- and GPT-2-style models; a program of one token per call prefills token by token."""
    other = build_tiny_lm(family, dynamic_shape=dynamic)
    ids = other.encode(PROMPTS[1])
    tokens = _tokens(_generate(gen_pool, other, prompt=PROMPTS[1], max_tokens=12, temperature=0))
    assert tokens == pte_greedy(other.pte, ids, 12, other.eos_ids) == eager_greedy(other, ids, 12)


def test_seeded_sampling_repeats(gen_pool: RuntimePool, lm: LmFiles) -> None:
    fields = {"prompt": PROMPTS[1], "max_tokens": 16, "temperature": 1.0, "top_p": 0.9}
    first = _tokens(_generate(gen_pool, lm, seed=11, **fields))
    assert _tokens(_generate(gen_pool, lm, seed=11, **fields)) == first
    others = {tuple(_tokens(_generate(gen_pool, lm, seed=s, **fields))) for s in (1, 2, 3)}
    assert others - {tuple(first)}


def test_a_stop_string_ends_the_text_before_it(gen_pool: RuntimePool, lm: LmFiles) -> None:
    full = _generate(gen_pool, lm, prompt=PROMPTS[2], max_tokens=32, temperature=0)
    text = "".join(e.text for e in full)
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    events = _generate(gen_pool, lm, prompt=PROMPTS[2], max_tokens=32, temperature=0, stop=[stop])
    assert "".join(e.text for e in events) == text[: text.index(stop)]
    assert events[-1].finish_reason == "stop"


def test_chat_messages_use_the_configs_template(gen_pool: RuntimePool, lm: LmFiles) -> None:
    from tokenizers import Tokenizer

    messages = [{"role": "user", "content": "hi there"}]
    events = _generate(gen_pool, lm, messages=messages, max_tokens=8, temperature=0)
    rendered = "<|begin_of_text|><|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n"
    ids = Tokenizer.from_file(str(lm.tokenizer_json)).encode(rendered, add_special_tokens=False)
    assert events[-1].usage is not None
    assert events[-1].usage.prompt_tokens == len(ids.ids)
    assert _tokens(events) == pte_greedy(lm.pte, ids.ids, 8, lm.eos_ids)


def test_prompts_beyond_the_context_or_vocabulary_are_refused(
    gen_pool: RuntimePool, lm: LmFiles
) -> None:
    too_long = [5] * (lm.max_seq_len + 1)
    with pytest.raises(ContextLengthError, match=f"{len(too_long)} tokens.*{lm.max_seq_len}"):
        _generate(gen_pool, lm, prompt_ids=too_long)
    with pytest.raises(ContextLengthError, match="the prompt has"):  # a frame over 64 KiB
        _generate(gen_pool, lm, prompt="word " * 20_000)
    vocab = int(lm.metadata["get_vocab_size"])
    with pytest.raises(InvalidInputError, match=f"token id {vocab} is outside"):
        _generate(gen_pool, lm, prompt_ids=[1, vocab])
    full = _generate(gen_pool, lm, prompt_ids=[5] * lm.max_seq_len, max_tokens=8, temperature=0)
    assert len(_tokens(full)) == 1 and full[-1].finish_reason in ("length", "stop")


def test_a_session_keeps_its_cache_between_turns(gen_pool: RuntimePool, lm: LmFiles) -> None:
    opened = len(gen_pool.sessions)  # the pool is the package's: other modules' sessions stay
    first = lm.encode(PROMPTS[0])
    turn = _tokens(
        _generate(gen_pool, lm, prompt_ids=first, max_tokens=6, temperature=0, session="chat-1")
    )
    second = [*first, *turn, *lm.encode(" and more")[1:]]
    again = _generate(
        gen_pool, lm, prompt_ids=second, max_tokens=10, temperature=0, session="chat-1"
    )
    assert _tokens(again) == pte_greedy(lm.pte, second, 10, lm.eos_ids)
    assert len(gen_pool.sessions) == opened + 1
    other = _generate(
        gen_pool, lm, prompt_ids=first[:3], max_tokens=4, temperature=0, session="chat-1"
    )  # a diverging prompt rewinds the cache
    assert _tokens(other) == pte_greedy(lm.pte, first[:3], 4, lm.eos_ids)


def test_two_projects_chats_interleave_without_leaking(gen_pool: RuntimePool, lm: LmFiles) -> None:
    """The same session key in two projects names two sessions, each with its own cache."""
    prompts = {"project-a": lm.encode(PROMPTS[0]), "project-b": lm.encode(PROMPTS[2])}

    async def turns() -> dict[str, list[list[int]]]:
        said: dict[str, list[list[int]]] = {scope: [] for scope in prompts}
        for _ in range(2):
            for scope, prompt in prompts.items():
                events = _stream(
                    gen_pool,
                    lm,
                    scope,
                    prompt_ids=prompt,
                    max_tokens=4,
                    temperature=0,
                    session="chat",
                )
                said[scope].append([t async for e in events for t in e.token_ids])
                prompt.extend(said[scope][-1])
        return said

    said = asyncio.run(turns())
    for scope, prompt in prompts.items():
        first = prompt[: len(prompt) - 8]
        assert said[scope][0] == pte_greedy(lm.pte, first, 4, lm.eos_ids)
        second = prompt[: len(prompt) - 4]
        assert said[scope][1] == pte_greedy(lm.pte, second, 4, lm.eos_ids)


def test_a_flood_of_streams_is_refused_per_project(
    gen_pool: RuntimePool, lm: LmFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gen_pool.sessions, "limits", SessionLimits(per_scope=1))

    async def flood() -> None:
        held = _stream(gen_pool, lm, prompt=PROMPTS[0], max_tokens=30, temperature=0.7, seed=1)
        await anext(held)
        with pytest.raises(SessionLimitError, match="1 generations under way"):
            await anext(_stream(gen_pool, lm, prompt=PROMPTS[1]))
        await held.aclose()
        other = [e async for e in _stream(gen_pool, lm, prompt=PROMPTS[1], max_tokens=2)]
        assert other[-1].finish_reason is not None

    asyncio.run(flood())


def test_closing_the_stream_frees_the_worker(gen_pool: RuntimePool, lm: LmFiles) -> None:
    async def close_early() -> GenerationEvent:
        stream = gen_pool.generate_async(
            _sha(lm.pte),
            lm.pte,
            # Seeded: unseeded, 1 run in a few dozen sampled the end token in the first event,
            # so the stream ended before it could be closed (seed 1 runs all 40 tokens).
            GenerationRequest(prompt=PROMPTS[0], max_tokens=40, temperature=0.7, seed=1),
            tokenizer=(_sha(lm.tokenizer_json), lm.tokenizer_json),
        )
        event = await anext(stream)
        await stream.aclose()
        return event

    workers = set(gen_pool.workers.live)
    assert asyncio.run(close_early()).finish_reason is None
    events = _generate(gen_pool, lm, prompt=PROMPTS[1], max_tokens=4, temperature=0)
    assert events[-1].finish_reason is not None
    assert gen_pool.stats.worker_crashes == 0 and gen_pool.stats.worker_restarts == 0
    assert gen_pool.workers.live == workers  # the same worker, freed, served the next one


def test_a_worker_dying_mid_stream_fails_that_stream_and_is_replaced(
    gen_pool: RuntimePool, lm: LmFiles
) -> None:
    """The worker is stopped (SIGSTOP) before the request, killed once the request waits
    unread in its socket (SIOCOUTQ), so the stream has started and cannot have finished."""
    (worker,) = gen_pool.workers.live

    async def killed() -> None:
        stream = _stream(gen_pool, lm, prompt=PROMPTS[0], max_tokens=8, session="doomed")
        os.kill(worker.process.pid, signal.SIGSTOP)
        first = asyncio.ensure_future(anext(stream))
        deadline = time.monotonic() + 30
        while _unread(worker.conn.fileno()) == 0 and not first.done():
            assert time.monotonic() < deadline, "the request never reached the worker"
            await asyncio.sleep(0.01)
        os.kill(worker.process.pid, signal.SIGKILL)
        with pytest.raises(WorkerCrashedError, match="crashed"):
            await first

    asyncio.run(killed())
    assert worker not in gen_pool.workers.live and gen_pool.stats.worker_crashes >= 1
    ids = lm.encode(PROMPTS[0])
    again = _generate(gen_pool, lm, prompt_ids=ids, max_tokens=4, temperature=0, session="doomed")
    assert _tokens(again) == pte_greedy(lm.pte, ids, 4, lm.eos_ids)


def _unread(fd: int) -> int:
    """Bytes this socket sent that its peer has not read yet (Linux SIOCOUTQ)."""
    out = fcntl.ioctl(fd, termios.TIOCOUTQ, b"\0\0\0\0")
    return int.from_bytes(out, "little")


def test_the_worker_loop_stops_at_a_cancel(lm: LmFiles, tmp_path: Path) -> None:
    """In process: a cancel waiting in the pipe stops the loop after its first token."""
    pool_end, worker_end = Pipe()
    pool_end.send_bytes(encode_message(CancelRequest(), []))
    request = GenerateRequest(
        sha256=_sha(lm.pte),
        path=str(lm.pte),
        tokenizer=BlobFile(sha256=_sha(lm.tokenizer_json), path=str(lm.tokenizer_json)),
        request=GenerationRequest(prompt=PROMPTS[0], max_tokens=40, temperature=0),
    )
    executor = Executor(WorkerConfig(cache_bytes=64 << 20))
    assert isinstance(executor.language_models.generate(request, worker_end), CancelledReply)
    reply, _ = decode_message(pool_end.recv_bytes(), WORKER_REPLY)
    assert isinstance(reply, GeneratedReply) and reply.event.finish_reason is None
    assert not pool_end.poll(0)
