"""Triton's generate extension (``/v2/models/{model}/generate`` and ``generate_stream``) against
a real ``pteforge serve``: the tiny Llama (a real XNNPACK ``.pte``) deployed as a model version
with its tokenizer, as the OpenAI routes serve it.

Greedy (``temperature`` 0) text, whole and streamed, is the decoded greedy tokens of the same
``.pte`` in process and of eager ``transformers``; the stream's pieces add up to the whole
text; errors are the ``/v2`` shape ``{"error": "..."}`` with a 4xx naming what is wrong.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.generation.lm_builder import LmFiles
from tests.server.lm_serving import greedy_reference
from tests.server.service import ServiceProcess

PROMPT = "The quick brown fox"
MAX_TOKENS = 12
GREEDY = {"max_tokens": MAX_TOKENS, "temperature": 0}


def _greedy_text(lm: LmFiles, prompt: str) -> tuple[str, str]:
    """The decoded greedy continuation of ``prompt`` and its finish reason."""
    tokens = greedy_reference(lm, lm.encode(prompt), MAX_TOKENS)
    return lm.decode(tokens), "stop" if tokens[-1] in lm.eos_ids else "length"


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON of each server-sent event of a whole stream."""
    lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    return [json.loads(line.removeprefix("data: ")) for line in lines]


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and isinstance(body["error"], str), body
    message: str = body["error"]
    return message


def test_greedy_generate_and_stream_are_the_pte_text(
    admin: httpx.Client, deployed: str, lm: LmFiles
) -> None:
    text, finish = _greedy_text(lm, PROMPT)
    whole = admin.post(
        f"/v2/models/{deployed}/generate", json={"text_input": PROMPT, "parameters": GREEDY}
    )
    assert whole.status_code == 200, whole.text
    answer = whole.json()
    assert (answer["model_name"], answer["model_version"]) == (deployed, "1")
    assert (answer["text_output"], answer["finish_reason"]) == (text, finish)
    assert answer["usage"]["prompt_tokens"] == len(lm.encode(PROMPT))
    path = f"/v2/models/{deployed}/versions/1/generate_stream"
    with admin.stream("POST", path, json={"text_input": PROMPT, **GREEDY}) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = _events(stream)
    # Tokens that queued up while the server was busy go out as one event, so how many
    # events there are depends on timing; what they carry does not.
    assert events and all(e["model_name"] == deployed for e in events)
    assert not any("finish_reason" in e for e in events[:-1])
    assert "".join(e["text_output"] for e in events) == text
    assert events[-1]["finish_reason"] == finish and events[-1]["usage"] == answer["usage"]


def test_a_stream_closed_early_leaves_the_next_generation_right(
    admin: httpx.Client, deployed: str, lm: LmFiles
) -> None:
    body = {"text_input": PROMPT, "parameters": {"max_tokens": lm.max_seq_len, "temperature": 0}}
    with admin.stream("POST", f"/v2/models/{deployed}/generate_stream", json=body) as stream:
        assert stream.status_code == 200
        next(stream.iter_lines())  # the client goes away mid-generation
    whole = admin.post(
        f"/v2/models/{deployed}/generate", json={"text_input": PROMPT, "parameters": GREEDY}
    )
    assert whole.json()["text_output"] == _greedy_text(lm, PROMPT)[0]


def test_stream_false_sends_the_whole_answer_as_one_event(
    admin: httpx.Client, deployed: str
) -> None:
    body = {"id": "req-7", "text_input": PROMPT, "parameters": GREEDY}
    whole = admin.post(f"/v2/models/{deployed}/generate", json=body)
    assert whole.status_code == 200 and whole.json()["id"] == "req-7"
    once = {**body, "parameters": {**GREEDY, "stream": False}}
    with admin.stream("POST", f"/v2/models/{deployed}/generate_stream", json=once) as stream:
        assert _events(stream) == [whole.json()]


def test_a_session_continues_from_its_cache(admin: httpx.Client, deployed: str) -> None:
    url = f"/v2/models/{deployed}/generate"
    session = {"X-Pteforge-Session": "v2-chat"}

    def turn(prompt: str, headers: dict[str, str]) -> str:
        answer = admin.post(url, json={"text_input": prompt, **GREEDY}, headers=headers)
        assert answer.status_code == 200, answer.text
        text: str = answer.json()["text_output"]
        return text

    first = turn(PROMPT, session)
    assert first == turn(PROMPT, {})
    follow = f"{PROMPT}{first} and"
    assert turn(follow, session) == turn(follow, {})


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"text_input": PROMPT, "parameters": {"temperature": 5}}, "'temperature'"),
        ({"text_input": PROMPT, "parameters": {"top_k": 4}}, "'top_k'"),
        ({"text_input": PROMPT, "max_tokens": 0}, "'max_tokens'"),
        ({"text_input": PROMPT, "seed": 1, "parameters": {"seed": 2}}, "'seed'"),
        ({"parameters": {"max_tokens": 4}}, "'text_input'"),
    ],
)
def test_a_bad_request_is_400_naming_it(
    admin: httpx.Client, deployed: str, body: dict[str, Any], named: str
) -> None:
    for route in ("generate", "generate_stream"):
        answer = admin.post(f"/v2/models/{deployed}/{route}", json=body)
        assert named in _error(answer, 400)


def test_unknown_models_and_missing_tokens(
    service: ServiceProcess, admin: httpx.Client, deployed: str
) -> None:
    body = {"text_input": PROMPT}
    assert "ghost" in _error(admin.post("/v2/models/ghost/generate", json=body), 404)
    pinned = admin.post(f"/v2/models/{deployed}/versions/9/generate_stream", json=body)
    assert f"{deployed!r} has no version 9 (its versions: 1)" in _error(pinned, 404)
    not_a_number = admin.post(f"/v2/models/{deployed}/versions/latest/generate", json=body)
    assert "'latest' must be a number" in _error(not_a_number, 400)  # as infer answers
    anonymous = httpx.post(f"{service.url}/v2/models/{deployed}/generate", json=body)
    _error(anonymous, 401)
    assert anonymous.headers["www-authenticate"] == "Bearer"
