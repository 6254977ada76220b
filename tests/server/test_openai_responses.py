"""``POST /v1/responses`` (OpenAI's Responses API, text only) through the unmodified ``openai``
client against a real ``pteforge serve``, on the tiny Llama of the other OpenAI tests: its
greedy text and usage are the chat route's for the same messages (whose tokens are the
``.pte``'s in process, ``test_openai_completions.py``), whole, streamed and through the
``responses.stream`` helper; what it does not do is a 400 naming the field.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.generation.lm_builder import LmFiles
from tests.server.lm_serving import chat_prompt, greedy_reference
from tests.server.service import ServiceProcess

MAX_TOKENS = 12
GREEDY: dict[str, Any] = {"temperature": 0, "max_output_tokens": MAX_TOKENS}
CHAT = [{"role": "user", "content": "What is the capital of France?"}]
STREAMED = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
ENDING = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


@pytest.fixture(scope="module")
def client(service: ServiceProcess) -> openai.OpenAI:
    assert service.admin_token
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=service.admin_token, max_retries=0)


def _chat(client: openai.OpenAI, model: str, messages: list[dict[str, Any]]) -> Any:
    """The chat route's greedy answer to ``messages``."""
    return client.chat.completions.create(
        model=model,
        messages=messages,
        temperature=0,
        max_tokens=MAX_TOKENS,  # type: ignore[arg-type]
    )


def _check_like_chat(response: Any, chat: Any) -> None:
    """``response`` says what ``chat`` says, with its usage and its ending."""
    choice = chat.choices[0]
    assert response.output_text == choice.message.content
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (
        chat.usage.prompt_tokens,
        chat.usage.completion_tokens,
        chat.usage.total_tokens,
    )
    assert response.status == ("incomplete" if choice.finish_reason == "length" else "completed")
    assert response.id.startswith("resp_") and response.output[0].id.startswith("msg_")
    assert response.store is False


def test_greedy_responses_are_the_chat_routes_streamed_or_not(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    chat = _chat(client, deployed, CHAT)
    expected = greedy_reference(lm, chat_prompt(lm, CHAT), MAX_TOKENS)
    assert chat.choices[0].message.content == lm.decode(expected)
    taken = {"store": True, "metadata": {"k": "v"}, "text": {"format": {"type": "text"}}}
    whole = client.responses.create(model=deployed, input=CHAT, **GREEDY, **taken)  # type: ignore[arg-type]
    _check_like_chat(whole, chat)
    assert (whole.metadata, whole.text.format.type) == ({"k": "v"}, "text")  # type: ignore[union-attr]
    events = list(client.responses.create(model=deployed, input=CHAT, stream=True, **GREEDY))  # type: ignore[arg-type]
    kinds = [event.type for event in events]
    deltas = [event for event in events if event.type == "response.output_text.delta"]
    assert kinds == [
        *STREAMED,
        *["response.output_text.delta"] * len(deltas),
        *ENDING,
        f"response.{whole.status}",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert "".join(event.delta for event in deltas) == whole.output_text
    _check_like_chat(events[-1].response, chat)


def test_the_stream_helper_gives_the_whole_answer(client: openai.OpenAI, deployed: str) -> None:
    """``responses.stream``'s final response; ``instructions`` is a system message first,
    and an earlier answer's output item may be sent back as it came."""
    earlier = client.responses.create(
        model=deployed, input="Hi", max_output_tokens=3, temperature=0
    )
    messages: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        earlier.output[0].model_dump(exclude_none=True),
    ]
    chat = _chat(
        client,
        deployed,
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": earlier.output_text},
        ],
    )
    arguments: dict[str, Any] = {"model": deployed, "input": messages, **GREEDY}
    whole = client.responses.create(**arguments, instructions="Be brief.")
    _check_like_chat(whole, chat)
    # the helper's final response needs a text that ends before max_output_tokens: one
    # that stops at its own last character, where it first comes
    stop = whole.output_text[-1]
    helper = client.responses.stream(
        **arguments, instructions="Be brief.", extra_body={"stop": [stop]}
    )
    with helper as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert (final.status, final.instructions) == ("completed", "Be brief.")
    assert (
        final.output_text == "".join(deltas) == whole.output_text[: whole.output_text.index(stop)]
    )


def test_max_output_tokens_makes_it_incomplete(client: openai.OpenAI, deployed: str) -> None:
    arguments: dict[str, Any] = {"model": deployed, "input": "Hi", "max_output_tokens": 1}
    arguments["extra_body"] = {"ignore_eos": True}
    whole = client.responses.create(**arguments)
    assert (whole.status, whole.incomplete_details and whole.incomplete_details.reason) == (
        "incomplete",
        "max_output_tokens",
    )
    assert whole.output[0].status == "incomplete" and whole.usage and whole.usage.output_tokens == 1  # type: ignore[union-attr]
    last = list(client.responses.create(**arguments, stream=True))[-1]
    assert last.type == "response.incomplete" and last.response.status == "incomplete"


def test_a_stream_closed_early_leaves_the_next_answer_right(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    arguments: dict[str, Any] = {"model": deployed, "input": "Hi", "temperature": 0}
    whole = client.responses.create(**arguments, max_output_tokens=MAX_TOKENS)
    long = {"max_output_tokens": lm.max_seq_len, "extra_body": {"ignore_eos": True}}
    stream = client.responses.create(**arguments, **long, stream=True)
    next(iter(stream))
    stream.close()  # the client goes away mid-generation
    again = client.responses.create(**arguments, max_output_tokens=MAX_TOKENS)
    assert again.output_text == whole.output_text


def test_events_are_named_as_their_type_and_valid(
    service: ServiceProcess, admin: httpx.Client, deployed: str
) -> None:
    """Each event's ``event:`` line is its ``type``, as the API sends them, and its data is
    what the ``openai`` package's models take, validated strictly (the client itself
    builds them without checking); no ``[DONE]``."""
    body = {"model": deployed, "input": "Hi", "stream": True, **GREEDY}
    with admin.stream("POST", "/v1/responses", json=body) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in answer.iter_lines() if line]
    names = [line.removeprefix("event: ") for line in lines[0::2]]
    events = [json.loads(line.removeprefix("data: ")) for line in lines[1::2]]
    assert [event["type"] for event in events] == names
    assert names[:4] == STREAMED and "[DONE]" not in lines[-1]
    valid = TypeAdapter(ResponseStreamEvent)
    assert [valid.validate_python(event).type for event in events] == names
    whole = admin.post("/v1/responses", json={**body, "stream": False}).raise_for_status()
    assert (
        Response.model_validate(whole.json()).output_text
        == events[-1]["response"]["output"][0]["content"][0]["text"]
    )


def test_no_token_is_401(service: ServiceProcess, deployed: str) -> None:
    anonymous = openai.OpenAI(base_url=f"{service.url}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        anonymous.responses.create(model=deployed, input="hi")


@pytest.mark.parametrize(
    ("arguments", "param", "words"),
    [
        (
            {"tools": [{"type": "function", "name": "f", "parameters": {}}]},
            "tools",
            "not supported",
        ),
        ({"previous_response_id": "resp_1"}, "previous_response_id", "not supported"),
        ({"reasoning": {"effort": "low"}}, "reasoning", "not supported"),
        ({"background": True}, "background", "not supported"),
        ({"text": {"format": {"type": "json_object"}}}, "text.format", "not supported"),
        ({"include": ["message.output_text.logprobs"]}, "include", "not supported"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input",
            "text only",
        ),
        (
            {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
            "input",
            "text only",
        ),
        ({"input": [{"role": "user", "content": "a"}] * 2049}, "input", "at most 2048 entries"),
        ({"input": []}, "input", "at least 1 item"),
        (
            {"input": [{"role": "user", "content": "a"}] * 2048, "instructions": "b"},
            "instructions",
            "at most 2048 messages",
        ),
        ({"max_output_tokens": 0}, "max_output_tokens", "greater than or equal to 1"),
        ({"extra_body": {"colour": "red"}}, "colour", "Unrecognized request argument"),
    ],
)
def test_what_it_does_not_do_is_400_naming_it(
    client: openai.OpenAI, deployed: str, arguments: dict[str, Any], param: str, words: str
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(**{"model": deployed, "input": "hi", **arguments})
    error = raised.value.response.json()["error"]
    assert error["param"] == param and words in error["message"], error


def test_a_client_asking_for_reasoning_content_gets_the_same_answer(
    admin: httpx.Client, deployed: str
) -> None:
    """pydantic-ai's body (2.68, ``OpenAIResponsesModel`` for a model named as OpenAI's
    reasoning models) asks to include ``reasoning.encrypted_content``: there is none, so the
    answer is the one without it."""
    body: dict[str, Any] = {
        "model": deployed,
        "stream": False,
        "include": ["reasoning.encrypted_content"],
        "input": [{"role": "user", "content": "Hi"}],
        "instructions": "Be",
        **GREEDY,
    }
    asked = admin.post("/v1/responses", json=body)
    assert asked.status_code == 200, asked.text
    plain = admin.post("/v1/responses", json={**body, "include": None}).raise_for_status()
    assert (
        Response.model_validate(asked.json()).output_text
        == plain.json()["output"][0]["content"][0]["text"]
    )


def test_an_item_reference_is_refused_naming_what_to_send(
    admin: httpx.Client, deployed: str
) -> None:
    """The Vercel AI SDK's second turn (ai 6.0, @ai-sdk/openai 3.0, store not set): the
    earlier answer as a reference to a stored item, which pteforge never stores."""
    body = {
        "model": deployed,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {"type": "item_reference", "id": "msg_2b3d83c123644f3e9462e9c823c4a205"},
            {"role": "user", "content": [{"type": "input_text", "text": "Hey"}]},
        ],
        **GREEDY,
    }
    refused = admin.post("/v1/responses", json=body)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == "input" and "stores nothing" in error["message"], error
    assert "store: false" in error["message"]


def test_a_prompt_longer_than_the_context_is_400(
    client: openai.OpenAI, deployed: str, lm: LmFiles
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=deployed, input="fox " * lm.max_seq_len, stream=True)
    assert raised.value.response.json()["error"]["code"] == "context_length_exceeded"
