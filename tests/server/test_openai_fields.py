"""OpenAI's own chat fields that clients send at their defaults are taken, and set otherwise
are refused naming them as fields pteforge does not do, not as unknown ones (no server)."""

from __future__ import annotations

from typing import Any

import pytest

from pteforge.server.generation.schemas import ChatBody

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_openai_defaults_are_taken() -> None:
    """``store``, ``metadata`` and ``service_tier`` were 'Unrecognized request argument
    supplied', OpenAI's words for a field it does not define."""
    defaults = {"store": False, "metadata": {"run": "7"}, "service_tier": "auto"}
    body = ChatBody.model_validate({**CHAT, **defaults, "modalities": ["text"]})
    assert body.unsupported() is None


@pytest.mark.parametrize(
    "field",
    [
        {"store": True},
        {"service_tier": "flex"},
        {"modalities": ["text", "audio"]},
        {"reasoning_effort": "low"},
        {"audio": {"voice": "alloy", "format": "wav"}},
        {"prediction": {"type": "content", "content": "x"}},
        {"web_search_options": {}},
    ],
)
def test_what_pteforge_does_not_do_is_named(field: dict[str, Any]) -> None:
    assert ChatBody.model_validate({**CHAT, **field}).unsupported() == next(iter(field))
