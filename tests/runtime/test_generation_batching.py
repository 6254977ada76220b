"""Events that queued up in the worker's pipe while the pool was not reading reach the
stream as one event with every token and all the text (``runtime/generation_replies.py``);
a real runtime worker and the tiny LM."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import time
from pathlib import Path

import pytest

from pteforge.contracts.generation import GenerationEvent, GenerationRequest
from pteforge.runtime import RuntimePool
from tests.generation.lm_builder import LmFiles, pte_greedy

pytestmark = pytest.mark.zoo  # builds a tiny LM (cached per machine by lm_builder)

PROMPT = "def generate(prompt"
MAX_TOKENS = 12


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _waiting(fd: int) -> bytes:
    """What the worker wrote that the pool has not read yet (peeked: left there)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=socket.dup(fd)) as peer:
        try:
            return peer.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return b""


def _events(pool: RuntimePool, lm: LmFiles, ids: list[int], wait: bool) -> list[GenerationEvent]:
    """The stream's events; with ``wait``, read its first one, then nothing until the
    worker's last event is in the pipe."""
    (worker,) = pool.workers.live
    request = GenerationRequest(prompt_ids=ids, max_tokens=MAX_TOKENS, temperature=0)
    tokenizer = (_sha(lm.tokenizer_json), lm.tokenizer_json)

    async def read() -> list[GenerationEvent]:
        stream = pool.generate_async(_sha(lm.pte), lm.pte, request, tokenizer=tokenizer)
        events = [await anext(stream)]
        deadline = time.monotonic() + 60
        finished = events[0].finish_reason is not None  # all of it had queued up already
        while wait and not finished and b'"finish_reason":"' not in _waiting(worker.conn.fileno()):
            assert time.monotonic() < deadline, "the worker never sent its last event"
            await asyncio.sleep(0.01)
        return events + [event async for event in stream]

    return asyncio.run(read())


def test_events_that_queued_up_come_as_one(gen_pool: RuntimePool, lm: LmFiles) -> None:
    ids = lm.encode(PROMPT)
    expected = pte_greedy(lm.pte, ids, MAX_TOKENS, lm.eos_ids)
    one_by_one = _events(gen_pool, lm, ids, wait=False)
    queued = _events(gen_pool, lm, ids, wait=True)
    # the first event, then the rest as one (or everything in the first, on a busy machine)
    assert len(queued) <= 2 and queued[-1].finish_reason == one_by_one[-1].finish_reason
    assert [t for e in queued for t in e.token_ids] == expected
    assert [t for e in one_by_one for t in e.token_ids] == expected
    assert "".join(e.text for e in queued) == "".join(e.text for e in one_by_one)
    assert queued[-1].usage == one_by_one[-1].usage
