"""Logprobs of generated tokens: equal to eager PyTorch's log-softmax at every step, with
the most likely alternatives, and each token's bytes as its tokenizer's decoder reads them
(byte-level BPE, SentencePiece with byte fallback, added tokens)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models

from pteforge.contracts.generation import TokenLogprob
from pteforge.runtime import RuntimePool
from pteforge.runtime.generation_worker import ECHO_TOKENS_PER_EVENT
from pteforge.runtime.logprobs import FLOOR, MAX_TOKEN_BYTES, TokenBytes, step_logprobs
from tests.generation.lm_builder import LmFiles, eager_greedy, eager_logprobs
from tests.runtime.lm_calls import generated

pytestmark = pytest.mark.zoo  # builds a tiny LM (cached per machine by lm_builder)


def test_greedy_logprobs_equal_eager_log_softmax(gen_pool: RuntimePool, lm: LmFiles) -> None:
    prompt = lm.encode("def generate(prompt")
    events = generated(gen_pool, lm, prompt_ids=prompt, max_tokens=8, temperature=0, logprobs=3)
    tokens = [t for e in events for t in e.token_ids]
    scored = [lp for e in events for lp in e.logprobs or ()]
    assert len(scored) == len(tokens) > 0
    for step, (token, lp, eager) in enumerate(
        zip(tokens, scored, eager_logprobs(lm, prompt, len(tokens)), strict=True)
    ):
        assert lp.id == token and lp.top[0].id == token  # greedy: the most likely one
        assert lp.logprob == pytest.approx(float(eager[token]), abs=1e-3), step
        best = torch.topk(eager, 3).indices.tolist()
        assert [t.id for t in lp.top] == best, step
        assert [t.logprob for t in lp.top] == pytest.approx(eager[best].tolist(), abs=1e-3)
    # the text leaves special tokens out, and writes U+FFFD for bytes that are no UTF-8
    special = set(Tokenizer.from_file(str(lm.tokenizer_json)).get_added_tokens_decoder())
    said = b"".join(bytes(lp.bytes) for lp in scored if lp.id not in special)
    assert said.decode(errors="replace") == "".join(e.text for e in events)


def _eager_prompt_logprobs(lm: LmFiles, prompt: list[int]) -> torch.Tensor:
    """Eager log-softmax of the logits after each prompt token (row i scores token i + 1)."""
    with torch.no_grad():
        logits = lm.eager(torch.tensor([prompt])).logits[0]  # type: ignore[operator]
    return torch.log_softmax(logits.double(), dim=-1)


def test_echo_scores_each_prompt_token_as_eager(gen_pool: RuntimePool, lm: LmFiles) -> None:
    prompt = lm.encode("def generate(prompt, tokens")
    eager = _eager_prompt_logprobs(lm, prompt)
    (event,) = generated(gen_pool, lm, prompt_ids=prompt, max_tokens=0, echo=True, logprobs=2)
    assert event.finish_reason == "length" and event.token_ids == ()
    assert event.usage is not None and (
        event.usage.prompt_tokens,
        event.usage.completion_tokens,
    ) == (len(prompt), 0)
    assert event.text == lm.decode(prompt)
    scored = event.logprobs or ()
    assert [lp.id for lp in scored] == prompt
    assert scored[0].logprob is None and scored[0].top == ()
    for i in range(1, len(prompt)):
        assert scored[i].logprob == pytest.approx(float(eager[i - 1, prompt[i]]), abs=1e-3), i
        assert [t.id for t in scored[i].top] == torch.topk(eager[i - 1], 2).indices.tolist()


def test_echo_comes_before_the_generated_tokens(gen_pool: RuntimePool, lm: LmFiles) -> None:
    # events that queue up in the pipe are read as one: only their order is checked
    prompt = lm.encode("1 2 3")
    events = generated(
        gen_pool, lm, prompt_ids=prompt, max_tokens=4, echo=True, logprobs=0, temperature=0
    )
    tokens = [t for e in events for t in e.token_ids]
    assert tokens == eager_greedy(lm, prompt, 4)
    assert [lp.id for e in events for lp in e.logprobs or ()] == prompt + tokens
    assert "".join(e.text for e in events).startswith(lm.decode(prompt))
    text = generated(gen_pool, lm, prompt="1 2 3", max_tokens=1, echo=True)
    assert "".join(e.text for e in text).startswith("1 2 3")  # a text prompt as it came
    assert all(e.logprobs is None for e in text)


def test_a_long_echo_is_scored_in_pieces(gen_pool: RuntimePool, lm: LmFiles) -> None:
    prompt = (lm.encode("def generate(prompt, tokens): return tokens") * 8)[: lm.max_seq_len]
    assert len(prompt) > ECHO_TOKENS_PER_EVENT
    eager = _eager_prompt_logprobs(lm, prompt)
    events = generated(gen_pool, lm, prompt_ids=prompt, max_tokens=0, echo=True, logprobs=1)
    scored = [lp for e in events for lp in e.logprobs or ()]
    assert [lp.id for lp in scored] == prompt and scored[0].logprob is None
    got = [lp.logprob for lp in scored[1:]]
    assert got == pytest.approx(
        [float(eager[i - 1, prompt[i]]) for i in range(1, len(prompt))], abs=1e-3
    )
    assert "".join(e.text for e in events) == lm.decode(prompt)
    assert events[-1].finish_reason == "length"


def test_without_logprobs_events_carry_none(gen_pool: RuntimePool, lm: LmFiles) -> None:
    events = generated(gen_pool, lm, prompt="1 2 3", max_tokens=3, temperature=0)
    assert all(e.logprobs is None for e in events)


def test_no_alternatives_when_zero_are_asked(gen_pool: RuntimePool, lm: LmFiles) -> None:
    events = generated(gen_pool, lm, prompt="1 2 3", max_tokens=3, seed=4, logprobs=0)
    scored = [lp for e in events for lp in e.logprobs or ()]
    assert scored and all(lp.top == () and lp.logprob <= 0 for lp in scored)


def _tokenizer(vocab: dict[str, int], decoder: decoders.Decoder) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.decoder = decoder
    return tokenizer


def test_byte_level_pieces_map_back_to_bytes() -> None:
    # "Ġ" is the space, "â" the byte 0xe2 (the first of "…"'s three) in GPT-2's table
    tokenizer = _tokenizer({"Ġhi": 0, "â": 1, "!": 2}, decoders.ByteLevel())
    tokenizer.add_special_tokens(["<|end|>"])
    bytes_of = TokenBytes(tokenizer)
    assert [bytes_of(i) for i in range(4)] == [b" hi", b"\xe2", b"!", b"<|end|>"]
    assert bytes_of(99) == b""
    huge = _tokenizer({"a" * 100_000: 0}, decoders.ByteLevel())
    assert TokenBytes(huge)(0) == b"a" * MAX_TOKEN_BYTES  # an upload's piece is cut


def test_sentencepiece_pieces_read_spaces_and_byte_fallback() -> None:
    decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tokenizer = _tokenizer({"\u2581hello": 0, "<0xE2>": 1, "wörld": 2}, decoder)
    bytes_of = TokenBytes(tokenizer)
    assert [bytes_of(i) for i in range(3)] == [b" hello", b"\xe2", "wörld".encode()]


def test_a_token_that_is_part_of_a_character_is_written_as_its_bytes() -> None:
    tokenizer = _tokenizer({"â": 0, "a": 1}, decoders.ByteLevel())
    logits = np.array([2.0, 1.0], np.float32)
    scored = step_logprobs(logits, 0, 2, TokenBytes(tokenizer))
    assert scored.token == "bytes:\\xe2" and scored.bytes == (0xE2,)
    expected = 2.0 - math.log(math.exp(2.0) + math.exp(1.0))
    assert scored.logprob == pytest.approx(expected)
    assert [t.token for t in scored.top] == ["bytes:\\xe2", "a"]


def test_impossible_tokens_get_the_floor_and_ties_keep_token_order() -> None:
    tokenizer = _tokenizer({"a": 0, "b": 1, "c": 2}, decoders.ByteLevel())
    logits = np.array([1.0, -np.inf, 1.0], np.float32)
    scored = step_logprobs(logits, 1, 3, TokenBytes(tokenizer))
    assert scored.logprob == FLOOR
    assert [t.token for t in scored.top] == ["a", "c", "b"]
    assert scored.top[0].logprob == pytest.approx(math.log(0.5))
    assert isinstance(scored.top[0], TokenLogprob) and scored.top[0].top == ()
