"""``/v1/chat/completions`` through Hugging Face's unmodified ``InferenceClient`` (its
OpenAI-compatible mode, ``base_url=.../v1``) against a real ``pteforge serve``."""

from __future__ import annotations

import pytest
from huggingface_hub import InferenceClient
from huggingface_hub.errors import HfHubHTTPError

from tests.server.service import ServiceProcess

CHAT = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def client(service: ServiceProcess) -> InferenceClient:
    assert service.admin_token
    return InferenceClient(base_url=f"{service.url}/v1", api_key=service.admin_token)


def test_greedy_chat_streamed_and_not_agree(client: InferenceClient, deployed: str) -> None:
    whole = client.chat_completion(CHAT, model=deployed, max_tokens=8, temperature=0)
    assert whole.choices[0].finish_reason in ("length", "stop")
    assert 0 < whole.usage.completion_tokens <= 8
    chunks = list(
        client.chat.completions.create(
            model=deployed, messages=CHAT, max_tokens=8, temperature=0, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == whole.choices[0].message.content
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_an_unknown_model_shows_openai_error(client: InferenceClient, deployed: str) -> None:
    with pytest.raises(HfHubHTTPError, match="The model 'ghost' does not exist") as raised:
        client.chat_completion(CHAT, model="ghost", max_tokens=2)
    assert raised.value.response is not None and raised.value.response.status_code == 404
