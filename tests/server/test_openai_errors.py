"""The OpenAI routes refuse what the OpenAI API would, in OpenAI's error shape, through the
unmodified ``openai`` client: no token (401), an unknown model (404), a body it does not
accept (400 naming the field), a version without a tokenizer (400)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.server.model_names import deploy, upload_scales
from tests.server.service import ServiceProcess


@pytest.fixture(scope="module")
def client(service: ServiceProcess, admin: httpx.Client) -> openai.OpenAI:
    assert service.admin_token
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=service.admin_token, max_retries=0)


@pytest.fixture(scope="module")
def untokenized(admin: httpx.Client) -> str:
    """A model name whose only version has no tokenizer."""
    deploy(admin, "no-tokenizer", upload_scales(admin, [1.0])[1.0])
    return "no-tokenizer"


def _error(raised: pytest.ExceptionInfo[openai.APIStatusError]) -> dict[str, Any]:
    body = raised.value.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    error: dict[str, Any] = body["error"]
    return error


def test_no_token_is_401(service: ServiceProcess) -> None:
    anonymous = openai.OpenAI(base_url=f"{service.url}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as raised:
        anonymous.completions.create(model="any", prompt="hi")
    assert _error(raised)["type"] == "authentication_error"


def test_an_unknown_model_is_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="ghost", messages=[{"role": "user", "content": "hi"}])
    assert (_error(raised)["code"], _error(raised)["param"]) == ("model_not_found", "model")
    with pytest.raises(openai.BadRequestError) as raised:
        client.completions.create(model="ghost:latest", prompt="hi")
    assert _error(raised)["param"] == "model"


@pytest.mark.parametrize(
    ("arguments", "param", "words"),
    [
        ({"n": 17}, "n", "less than or equal to 16"),
        ({"logprobs": 21}, "logprobs", "less than or equal to 20"),
        ({"best_of": 2}, "best_of", "not supported"),
        ({"max_tokens": 0}, "max_tokens", "0 only with echo"),
        ({"temperature": 3}, "temperature", "less than or equal to 2"),
        ({"extra_body": {"colour": "red"}}, "colour", "Unrecognized request argument"),
        ({"prompt": []}, "prompt", "1 to 16 prompts, not 0"),
        ({"prompt": ["a"] * 100_000}, "prompt", "1 to 16 prompts, not 100000"),
        ({"prompt": [[]]}, "prompt", "at least one token"),
        ({"prompt": [2**64]}, "prompt", "token ids are from 0 to 2147483647"),
        ({"stop": [""]}, None, "stop string"),
        ({"max_tokens": -1}, "max_tokens", "greater than or equal to 0"),
        ({"n": 10**9}, "n", "less than or equal to 16"),
        ({"stop": ["x"] * 10_000}, "stop", "at most 16 items"),
        ({"logit_bias": {str(i): 1 for i in range(301)}}, "logit_bias", "at most 300 entries"),
        ({"logit_bias": {"x": -100}}, "logit_bias", "keys are token ids from 0"),
        ({"logit_bias": {"7": 1, "07": -1}}, "logit_bias", "not '07'"),
        ({"logit_bias": {"1": 101}}, "logit_bias", "less than or equal to 100"),
        ({"presence_penalty": -3}, "presence_penalty", "greater than or equal to -2"),
    ],
)
def test_a_body_openai_refuses_is_400(
    client: openai.OpenAI, untokenized: str, arguments: dict[str, Any], param: str, words: str
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.completions.create(**{"model": untokenized, "prompt": "hi", **arguments})
    error = _error(raised)
    assert error["type"] == "invalid_request_error" and words in error["message"], error
    if param is not None:
        assert error["param"] == param


def test_a_version_without_a_tokenizer_is_400(client: openai.OpenAI, untokenized: str) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.completions.create(model=f"{untokenized}:1", prompt="hi", stream=True)
    error = _error(raised)
    assert error["code"] == "tokenizer_missing"
    assert f"/v1/models/{untokenized}/versions/1/tokenizer" in error["message"]


def test_a_body_that_is_not_json_is_400(service: ServiceProcess, admin: httpx.Client) -> None:
    answer = admin.post("/v1/chat/completions", content=b"{not json")
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("messages", "words"),
    [
        ([{"role": "user", "content": "a"}] * 2049, "messages: at most 2048 entries, got 2049"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "a"}] * 17}],
            "messages.0.content: at most 16 entries, got 17",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": [[["a"]]]}]}], "messages.0"),
    ],
)
def test_a_chat_past_its_limits_is_400_naming_it(
    client: openai.OpenAI, untokenized: str, messages: list[Any], words: str
) -> None:
    """A chat's messages and content parts are counted before each is built: 16 MiB of
    one-letter messages (559,000) cost the server 4 s of its event loop and 500 MiB."""
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=untokenized, messages=messages)
    error = _error(raised)
    assert error["param"] == "messages" and words in error["message"], error
