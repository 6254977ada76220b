"""``/v1/completions`` and ``/v1/chat/completions`` through the unmodified ``openai`` client
against a real ``pteforge serve``: a tiny Llama-style LM (a real XNNPACK ``.pte`` with the
runner's metadata methods) and its byte-level BPE tokenizer, deployed as a model version.

Greedy (``temperature`` 0) answers, streamed and not, carry exactly the tokens of the same
``.pte``'s in-process greedy loop and of eager ``transformers`` ``generate``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tests.generation.lm_builder import LmFiles
from tests.generation.lm_tokenizer import BOS, CHAT_TEMPLATE
from tests.server.lm_serving import MODEL, chat_prompt, deploy_lm, greedy_reference
from tests.server.model_names import deploy
from tests.server.service import ServiceProcess

PROMPT = "The quick brown fox"
MAX_TOKENS = 12
IDS = {"return_token_ids": True}
CHAT = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def client(service: ServiceProcess) -> openai.OpenAI:
    assert service.admin_token
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=service.admin_token, max_retries=0)


def _expected(lm: LmFiles, prompt_ids: list[int]) -> list[int]:
    """The greedy tokens of the same ``.pte`` in process, checked against eager PyTorch."""
    return greedy_reference(lm, prompt_ids, MAX_TOKENS)


def _finish(lm: LmFiles, tokens: list[int]) -> str:
    return "stop" if tokens[-1] in lm.eos_ids else "length"


def _piece(choice: Any) -> str:
    """The text of one chunk's choice: completions' ``text``, chat's ``delta.content``."""
    delta = getattr(choice, "delta", None)
    text = choice.text if delta is None else delta.content
    return text or ""


def _streamed(chunks: list[Any]) -> tuple[str, list[int], list[str | None], Any]:
    """Text, token ids, finish reasons and usage of a completions stream."""
    choices = [chunk.choices[0] for chunk in chunks if chunk.choices]
    text = "".join(_piece(choice) for choice in choices)
    ids = [t for c in choices for t in c.to_dict().get("token_ids", [])]
    return text, ids, [c.finish_reason for c in choices], chunks[-1].usage


def test_greedy_completions_are_the_pte_tokens(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    prompt_ids = lm.encode(PROMPT)
    expected = _expected(lm, prompt_ids)
    arguments: dict[str, Any] = {"max_tokens": MAX_TOKENS, "temperature": 0, "extra_body": IDS}
    whole = client.completions.create(model=deployed, prompt=PROMPT, **arguments)
    choice = whole.choices[0]
    assert choice.to_dict()["token_ids"] == expected
    assert choice.text == lm.decode(expected)
    assert choice.finish_reason == _finish(lm, expected)
    assert whole.usage is not None
    assert (whole.usage.prompt_tokens, whole.usage.completion_tokens) == (
        len(prompt_ids),
        len(expected),
    )
    stream = client.completions.create(
        model=f"{deployed}:1", prompt=prompt_ids, stream=True,
        stream_options={"include_usage": True}, **arguments,
    )  # fmt: skip
    text, ids, finishes, usage = _streamed(list(stream))
    assert (text, ids) == (choice.text, expected)
    assert finishes[-1] == choice.finish_reason and set(finishes[:-1]) <= {None}
    assert usage is not None and usage.completion_tokens == len(expected)


def test_greedy_chats_are_the_pte_tokens(client: openai.OpenAI, deployed: str, lm: LmFiles) -> None:
    prompt_ids = chat_prompt(lm, CHAT)
    expected = _expected(lm, prompt_ids)
    arguments: dict[str, Any] = {"max_tokens": MAX_TOKENS, "temperature": 0, "extra_body": IDS}
    whole = client.chat.completions.create(model=deployed, messages=CHAT, **arguments)  # type: ignore[arg-type]
    choice = whole.choices[0]
    assert choice.to_dict()["token_ids"] == expected
    assert choice.message.role == "assistant" and choice.message.content == lm.decode(expected)
    assert choice.finish_reason == _finish(lm, expected)
    assert whole.usage is not None and whole.usage.prompt_tokens == len(prompt_ids)
    stream = client.chat.completions.create(model=deployed, messages=CHAT, stream=True, **arguments)  # type: ignore[arg-type]
    text, ids, finishes, _ = _streamed(list(stream))
    assert (text, ids, finishes[-1]) == (choice.message.content, expected, choice.finish_reason)


def test_a_chat_template_file_serves_chats(
    client: openai.OpenAI, admin: httpx.Client, deployed: str, lm: LmFiles
) -> None:
    """The template as ``transformers`` saves it, ``chat_template.jinja`` beside a config
    without one, renders chats as the config's own does."""
    config = json.loads(lm.tokenizer_config.read_text())
    template = config.pop("chat_template")
    versions = admin.get(f"/v1/models/{deployed}").raise_for_status().json()["versions"]
    deploy(admin, "tiny-llama-jinja", versions[0]["artifact_id"])
    parts = {
        "tokenizer": ("tokenizer.json", lm.tokenizer_json.read_bytes()),
        "tokenizer_config": ("tokenizer_config.json", json.dumps(config).encode()),
        "chat_template": ("chat_template.jinja", template.encode()),
    }
    put = admin.put("/v1/models/tiny-llama-jinja/versions/1/tokenizer", files=parts)
    assert put.status_code == 201, put.text
    expected = _expected(lm, chat_prompt(lm, CHAT))
    arguments: dict[str, Any] = {"max_tokens": MAX_TOKENS, "temperature": 0, "extra_body": IDS}
    whole = client.chat.completions.create(model="tiny-llama-jinja", messages=CHAT, **arguments)  # type: ignore[arg-type]
    assert whole.choices[0].to_dict()["token_ids"] == expected


def test_chat_template_kwargs_reach_the_template(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    """vLLM's ``chat_template_kwargs`` (Qwen3's ``enable_thinking``): here the template's
    ``add_generation_prompt`` turned off; ``messages`` may not be replaced."""
    template = ImmutableSandboxedEnvironment().from_string(CHAT_TEMPLATE)
    rendered = template.render(messages=CHAT, bos_token=BOS, add_generation_prompt=False)
    extra = {"chat_template_kwargs": {"add_generation_prompt": False}}
    whole = client.chat.completions.create(
        model=deployed,
        messages=CHAT,
        max_tokens=1,
        extra_body=extra,  # type: ignore[arg-type]
    )
    assert whole.usage and whole.usage.prompt_tokens == len(lm.encode(rendered.removeprefix(BOS)))
    with pytest.raises(openai.BadRequestError, match="replace the messages"):
        extra = {"chat_template_kwargs": {"messages": []}}
        client.chat.completions.create(model=deployed, messages=CHAT, extra_body=extra)  # type: ignore[arg-type]


def test_a_prompt_longer_than_the_context_is_400(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    too_long = [lm.bos_id] + [7] * lm.max_seq_len
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as raised:
            client.completions.create(model=deployed, prompt=too_long, stream=stream)
        error = raised.value.response.json()["error"]
        assert error["code"] == "context_length_exceeded"
        assert str(len(too_long)) in error["message"] and str(lm.max_seq_len) in error["message"]


def test_an_empty_prompt_is_the_bos_token_alone(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    """An empty text is a prompt (OpenAI takes it): the tokenizer's BOS alone (models
    pass: it was a 400 'Value should have at least 1 item')."""
    expected = _expected(lm, lm.encode(""))
    arguments: dict[str, Any] = {"max_tokens": MAX_TOKENS, "temperature": 0, "extra_body": IDS}
    whole = client.completions.create(model=deployed, prompt="", **arguments)
    assert (whole.choices[0].to_dict()["token_ids"], whole.usage.prompt_tokens) == (expected, 1)


def test_a_stream_closed_early_leaves_the_next_generation_right(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    prompt_ids = lm.encode(PROMPT)
    stream = client.completions.create(
        model=deployed, prompt=prompt_ids, max_tokens=lm.max_seq_len, temperature=0, stream=True
    )
    next(iter(stream))
    stream.close()  # the client goes away mid-generation
    whole = client.completions.create(
        model=deployed, prompt=prompt_ids, max_tokens=MAX_TOKENS, temperature=0, extra_body=IDS
    )
    assert whole.choices[0].to_dict()["token_ids"] == _expected(lm, prompt_ids)


def test_a_version_added_serves_at_once(
    client: openai.OpenAI, admin: httpx.Client, lm: LmFiles
) -> None:
    """The latest version's target is remembered between requests, but a version added or
    given a tokenizer through the server is what the next request gets."""
    model = deploy_lm(admin, lm, "fresh-lm")
    client.completions.create(model=model, prompt="Hi", max_tokens=1)  # remembered
    deploy(admin, model, admin.get(f"/v1/models/{model}").json()["versions"][0]["artifact_id"])
    with pytest.raises(openai.BadRequestError) as raised:  # version 2 has no tokenizer yet
        client.completions.create(model=model, prompt="Hi", max_tokens=1)
    assert f"/v1/models/{model}/versions/2/tokenizer" in str(raised.value)
    parts = {"tokenizer": ("tokenizer.json", lm.tokenizer_json.read_bytes())}
    assert admin.put(f"/v1/models/{model}/versions/2/tokenizer", files=parts).status_code == 201
    assert client.completions.create(model=model, prompt="Hi", max_tokens=1).choices


def _chat(client: openai.OpenAI, messages: list[Any], session: str | None = None) -> list[int]:
    headers = {} if session is None else {"X-Pteforge-Session": session}
    whole = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=4, temperature=0,
        extra_body=IDS, extra_headers=headers,
    )  # fmt: skip
    tokens: list[int] = whole.choices[0].to_dict()["token_ids"]
    return tokens


def test_a_session_keeps_the_chat_between_turns(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    hello = [{"role": "user", "content": "Hello!"}]
    first = _chat(client, hello, session="chat-1")
    assert first == _chat(client, hello)
    turns = [*hello, {"role": "assistant", "content": lm.decode(first)}]
    turns.append({"role": "user", "content": "Paris?"})
    assert _chat(client, turns, session="chat-1") == _chat(client, turns)  # the cache reused


def test_the_python_client_generates_and_streams(
    service: ServiceProcess, deployed: str, lm: LmFiles
) -> None:
    from pteforge.client import Client

    expected = lm.decode(_expected(lm, lm.encode(PROMPT)))
    pieces: list[str] = []
    arguments: dict[str, Any] = {"max_tokens": MAX_TOKENS, "temperature": 0}
    with Client(service.url, service.admin_token) as pteforge:
        whole = pteforge.generate(deployed, PROMPT, **arguments)
        streamed = pteforge.generate(
            deployed, PROMPT, version=1, on_text=pieces.append, **arguments
        )
    assert whole.text == streamed.text == "".join(pieces) == expected
    assert (whole.finish_reason, whole.usage) == (streamed.finish_reason, streamed.usage)


def test_pteforge_chat_streams_the_greedy_answers(
    service: ServiceProcess, deployed: str, lm: LmFiles, tmp_path: Path
) -> None:
    expected = lm.decode(_expected(lm, chat_prompt(lm, CHAT)))
    env = {
        **os.environ,
        "PTEFORGE_CONFIG": str(tmp_path / "none.json"),
        "PTEFORGE_URL": service.url,
        "PTEFORGE_TOKEN": str(service.admin_token),
    }
    command = [sys.executable, "-m", "pteforge", "chat", f"{deployed}:1", "--temperature", "0"]
    done = subprocess.run(
        [*command, "--max-tokens", str(MAX_TOKENS)],
        input=f"{CHAT[0]['content']}\n\n", env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{expected}\n"


def test_pteforge_chat_goes_on_when_the_conversation_outgrows_the_context(
    service: ServiceProcess, deployed: str, lm: LmFiles, tmp_path: Path
) -> None:
    """The server refuses a prompt over the context (64 tokens here), and the chat ended
    there with an error (new-user pass): it now drops the oldest turns, and reports a turn
    too long alone, and goes on."""
    turn = "Hello, world! How are you today?"
    assert 8 < len(lm.encode(turn)) < lm.max_seq_len // 3
    env = {
        **os.environ,
        "PTEFORGE_CONFIG": str(tmp_path / "none.json"),
        "PTEFORGE_URL": service.url,
        "PTEFORGE_TOKEN": str(service.admin_token),
    }
    turns = [turn] * 4 + [turn * 10, turn]
    done = subprocess.run(
        [sys.executable, "-m", "pteforge", "chat", f"{deployed}:1", "--temperature", "0",
         "--max-tokens", str(MAX_TOKENS)],
        input="\n".join(turns) + "\n\n", env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "the conversation outgrew the model's context" in done.stderr
    assert "this turn is left out" in done.stderr and "context_length" not in done.stdout
