"""Logprobs, logit bias and penalties through the unmodified ``openai`` client against a
real ``pteforge serve``: logprobs in each API's own shape, equal to eager PyTorch's
log-softmax at every greedy step, the same whether streamed or not; a bias and penalties
reach the worker's decode loop; asking wrongly is a 400 naming the field."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.generation.lm_builder import LmFiles, eager_logprobs
from tests.server.lm_serving import greedy_reference
from tests.server.service import ServiceProcess

PROMPT = "The quick brown fox"
MAX_TOKENS = 8
CHAT = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def client(service: ServiceProcess) -> openai.OpenAI:
    assert service.admin_token
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=service.admin_token, max_retries=0)


def _streamed_completion(chunks: list[Any]) -> dict[str, list[Any]]:
    """The completions logprobs of a stream's chunks, joined."""
    joined: dict[str, list[Any]] = {}
    for chunk in chunks:
        logprobs = chunk.choices[0].logprobs if chunk.choices else None
        for key, values in (logprobs.to_dict() if logprobs else {}).items():
            joined.setdefault(key, []).extend(values)
    return joined


def _offsets_point_into(text: str, tokens: list[str], offsets: list[int]) -> None:
    """Each token stands at its ``text_offset`` in the text, up to the first that is part of
    a character (``bytes:``: it moves the offset once the character is whole, or, never
    whole, the tokenizer writes U+FFFD as its decoder sees fit)."""
    assert len(offsets) == len(tokens) and offsets == sorted(offsets) and offsets[0] == 0
    for token, offset in zip(tokens, offsets, strict=True):
        if token.startswith("bytes:") or offset >= len(text):  # the EOS stands past the text
            break
        assert text[offset : offset + len(token)] == token, (token, offset, text)


def test_completion_logprobs_are_eager_log_softmax(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    prompt_ids = lm.encode(PROMPT)
    expected = greedy_reference(lm, prompt_ids, MAX_TOKENS)
    rows = eager_logprobs(lm, prompt_ids, len(expected))
    arguments: dict[str, Any] = {"max_tokens": MAX_TOKENS, "temperature": 0, "logprobs": 2}
    whole = client.completions.create(model=deployed, prompt=PROMPT, **arguments)
    logprobs = whole.choices[0].logprobs
    assert logprobs is not None and logprobs.token_logprobs is not None
    assert logprobs.token_logprobs == pytest.approx(
        [float(row[t]) for t, row in zip(expected, rows, strict=True)], abs=1e-3
    )
    assert logprobs.tokens is not None and logprobs.top_logprobs is not None
    for token, chosen, top in zip(
        logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs, strict=True
    ):
        assert 1 <= len(top) <= 3 and top[token] == chosen == max(top.values())
    _offsets_point_into(whole.choices[0].text, logprobs.tokens, logprobs.text_offset or [])
    stream = client.completions.create(model=deployed, prompt=PROMPT, stream=True, **arguments)
    assert _streamed_completion(list(stream)) == logprobs.to_dict()


def test_echo_sends_the_prompt_first_streamed_or_not(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    prompt_ids = lm.encode(PROMPT)
    expected = greedy_reference(lm, prompt_ids, 3)
    arguments: dict[str, Any] = {"max_tokens": 3, "temperature": 0, "logprobs": 1, "echo": True}
    whole = client.completions.create(model=deployed, prompt=PROMPT, **arguments)
    choice = whole.choices[0]
    assert choice.text == PROMPT + lm.decode(expected)
    logprobs = choice.logprobs
    assert logprobs is not None and logprobs.token_logprobs is not None
    assert len(logprobs.token_logprobs) == len(prompt_ids) + len(expected)
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None  # type: ignore[index]
    offsets = logprobs.text_offset or []
    special = len(logprobs.tokens[0])  # type: ignore[index]  # the BOS, counted as vLLM does
    _offsets_point_into(choice.text, logprobs.tokens[1:], [o - special for o in offsets[1:]])  # type: ignore[index]
    stream = list(
        client.completions.create(model=deployed, prompt=PROMPT, stream=True, **arguments)
    )
    assert "".join(chunk.choices[0].text for chunk in stream if chunk.choices) == choice.text
    assert _streamed_completion(stream) == logprobs.to_dict()


def test_n_choices_draw_from_successive_seeds(client: openai.OpenAI, deployed: str) -> None:
    arguments: dict[str, Any] = {"max_tokens": 6, "temperature": 1.0, "seed": 7}
    several = client.completions.create(model=deployed, prompt=PROMPT, n=3, **arguments)
    assert [c.index for c in several.choices] == [0, 1, 2]
    for j, choice in enumerate(several.choices):
        alone = client.completions.create(
            model=deployed, prompt=PROMPT, **{**arguments, "seed": 7 + j}
        )
        assert (choice.text, choice.finish_reason) == (
            alone.choices[0].text,
            alone.choices[0].finish_reason,
        )
    usage, one = several.usage, alone.usage
    assert usage is not None and one is not None
    assert usage.prompt_tokens == one.prompt_tokens  # the prompt counted once, as OpenAI does
    chats = client.chat.completions.create(model=deployed, messages=CHAT, n=2, **arguments)  # type: ignore[arg-type]
    assert [c.index for c in chats.choices] == [0, 1]
    streamed = list(
        client.chat.completions.create(model=deployed, messages=CHAT, n=2, stream=True, **arguments)
    )  # type: ignore[arg-type]
    opened = [c.choices[0].index for c in streamed if c.choices and c.choices[0].delta.role]
    assert opened == [0, 1]
    for choice in chats.choices:
        said = [
            c.choices[0].delta.content or "" for c in streamed if c.choices[0].index == choice.index
        ]
        assert "".join(said) == choice.message.content


def test_a_batch_of_prompts_answers_each_in_order(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    prompts = [lm.encode(PROMPT), lm.encode("1 2 3")]
    expected = [greedy_reference(lm, ids, 4) for ids in prompts]
    batch = client.completions.create(model=deployed, prompt=prompts, max_tokens=4, temperature=0)
    assert [c.text for c in batch.choices] == [lm.decode(tokens) for tokens in expected]
    assert batch.usage is not None
    assert batch.usage.prompt_tokens == sum(len(ids) for ids in prompts)
    assert batch.usage.completion_tokens == sum(len(tokens) for tokens in expected)


def test_several_choices_stream_one_after_another(client: openai.OpenAI, deployed: str) -> None:
    arguments: dict[str, Any] = {"max_tokens": 5, "temperature": 1.0, "seed": 11, "logprobs": 1}
    prompts = [PROMPT, "1 2 3"]
    whole = client.completions.create(model=deployed, prompt=prompts, n=2, **arguments)
    stream = client.completions.create(
        model=deployed, prompt=prompts, n=2, stream=True, stream_options={"include_usage": True},
        **arguments,
    )  # fmt: skip
    chunks = list(stream)
    texts: dict[int, str] = {}
    for chunk in chunks[:-1]:
        (choice,) = chunk.choices
        texts[choice.index] = texts.get(choice.index, "") + choice.text
    assert texts == {c.index: c.text for c in whole.choices}
    indices = [chunk.choices[0].index for chunk in chunks[:-1]]
    assert indices == sorted(indices)  # one choice after another
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    with pytest.raises(openai.BadRequestError) as raised:
        client.completions.create(model=deployed, prompt=["a"] * 9, n=2)
    assert "at most 16 choices" in raised.value.response.json()["error"]["message"]


def test_a_choice_that_fails_ends_the_stream_with_its_error(
    service: ServiceProcess, deployed: str, lm: LmFiles
) -> None:
    too_long = [lm.bos_id] * (lm.max_seq_len + 1)
    body = {
        "model": deployed,
        "prompt": [lm.encode(PROMPT), too_long],
        "max_tokens": 3,
        "stream": True,
    }
    headers = {"Authorization": f"Bearer {service.admin_token}"}
    answer = httpx.post(f"{service.url}/v1/completions", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200  # the first choice streamed before the second failed
    events = [line.removeprefix("data: ") for line in answer.text.splitlines() if line]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == "context_length_exceeded", error
    assert {json.loads(e)["choices"][0]["index"] for e in events[:-2]} == {0}


def test_chat_logprobs_have_bytes_and_alternatives(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    arguments: dict[str, Any] = {"max_tokens": MAX_TOKENS, "temperature": 0}
    asked = {"logprobs": True, "top_logprobs": 3, **arguments}
    whole = client.chat.completions.create(model=deployed, messages=CHAT, **asked)  # type: ignore[arg-type]
    choice = whole.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content
    content = choice.logprobs.content
    assert whole.usage is not None and len(content) == whole.usage.completion_tokens
    for entry in content:
        assert entry.bytes is not None and len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob == entry.logprob  # greedy: the most likely
        assert [t.logprob for t in entry.top_logprobs] == sorted(
            (t.logprob for t in entry.top_logprobs), reverse=True
        )
    stream = client.chat.completions.create(model=deployed, messages=CHAT, stream=True, **asked)  # type: ignore[arg-type]
    pieces = [c.choices[0].logprobs for c in stream if c.choices and c.choices[0].logprobs]
    streamed = [entry for piece in pieces for entry in piece.content or ()]
    assert streamed == content
    plain = client.chat.completions.create(model=deployed, messages=CHAT, **arguments)  # type: ignore[arg-type]
    assert plain.choices[0].logprobs is None


def test_bias_and_penalties_reach_the_decode_loop(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    ids: dict[str, Any] = {"return_token_ids": True}
    arguments: dict[str, Any] = {"max_tokens": 4, "temperature": 0, "extra_body": ids}
    plain = client.completions.create(model=deployed, prompt=PROMPT, **arguments)
    tokens = plain.choices[0].to_dict()["token_ids"]
    wanted = next(t for t in range(10, 100) if t not in tokens and t not in lm.eos_ids)
    biased = client.completions.create(
        model=deployed, prompt=PROMPT, logit_bias={str(wanted): 100}, **arguments
    )
    assert biased.choices[0].to_dict()["token_ids"] == [wanted] * 4
    chat = client.chat.completions.create(
        model=deployed,
        messages=CHAT,
        logit_bias={str(wanted): 100},
        **arguments,  # type: ignore[arg-type]
    )
    assert chat.choices[0].to_dict()["token_ids"] == [wanted] * 4
    with pytest.raises(openai.BadRequestError, match="outside the model's vocabulary"):
        client.completions.create(
            model=deployed, prompt=PROMPT, logit_bias={"99999": 1}, **arguments
        )


@pytest.mark.parametrize(
    ("arguments", "param", "words"),
    [
        ({"top_logprobs": 2}, "top_logprobs", "needs logprobs set to true"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "less than or equal to 20"),
    ],
)
def test_chat_logprobs_asked_wrongly_are_400(
    client: openai.OpenAI, deployed: str, arguments: dict[str, Any], param: str, words: str
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=deployed, messages=CHAT, **arguments)  # type: ignore[arg-type]
    body = raised.value.body
    error = body.get("error", body) if isinstance(body, dict) else {}
    assert error["param"] == param and words in error["message"], error


def test_ignore_eos_generates_up_to_max_tokens(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    """vLLM's ``ignore_eos`` (GuideLLM sends it to fix each answer's length): an answer
    whose every token is biased to the end-of-sequence token runs to ``max_tokens``."""
    eos = lm.eos_ids[0]
    ids: dict[str, Any] = {"return_token_ids": True}
    arguments: dict[str, Any] = {"max_tokens": 4, "temperature": 0, "logit_bias": {str(eos): 100}}
    ended = client.completions.create(model=deployed, prompt=PROMPT, extra_body=ids, **arguments)
    assert ended.choices[0].to_dict()["token_ids"] == [eos]
    assert ended.choices[0].finish_reason == "stop"
    ignoring = {**ids, "ignore_eos": True}
    full = client.completions.create(
        model=deployed, prompt=PROMPT, extra_body=ignoring, **arguments
    )
    assert full.choices[0].to_dict()["token_ids"] == [eos] * 4
    assert full.choices[0].finish_reason == "length"
    assert full.usage is not None and full.usage.completion_tokens == 4


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_continuous_usage_counts_every_chunk(
    client: openai.OpenAI, deployed: str, lm: LmFiles, chat: bool
) -> None:
    """``stream_options.continuous_usage_stats`` (vLLM's; GuideLLM asks for it): each chunk
    carries the usage so far, growing by its tokens, ending at the last chunk's usage."""
    asked: dict[str, Any] = {"max_tokens": 6, "temperature": 0, "stream": True}
    asked["extra_body"] = {"return_token_ids": True, "ignore_eos": True}
    options: Any = {"include_usage": True, "continuous_usage_stats": True}
    if chat:
        stream: Any = client.chat.completions.create(
            model=deployed, messages=CHAT, stream_options=options, **asked
        )
    else:
        stream = client.completions.create(
            model=deployed, prompt=PROMPT, stream_options=options, **asked
        )
    chunks = list(stream)
    counted = [c for c in chunks if c.choices and c.choices[0].to_dict().get("token_ids")]
    assert counted and all(c.usage is not None for c in counted)
    generated = 0
    for chunk in counted:
        generated += len(chunk.choices[0].to_dict()["token_ids"])
        assert chunk.usage.completion_tokens == generated
        assert chunk.usage.total_tokens == chunk.usage.prompt_tokens + generated
    assert chunks[-1].usage is not None and not chunks[-1].choices
    assert chunks[-1].usage.completion_tokens == generated == 6
    assert counted[0].usage.prompt_tokens == chunks[-1].usage.prompt_tokens
    if not chat:
        assert chunks[-1].usage.prompt_tokens == len(lm.encode(PROMPT))
    options = {"include_usage": True}
    plain = client.completions.create(
        model=deployed, prompt=PROMPT, stream_options=options, **asked
    )
    assert all(c.usage is None for c in plain if c.choices)
