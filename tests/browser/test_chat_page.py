"""The dashboard's chat page in a real browser: it streams the API's greedy answer, shows
time to first token, tokens and tokens per second, and keeps a second turn in its session."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, expect

from tests.browser.pages import new_page, script_errors, shot, sign_in
from tests.server.service import ServiceProcess

WAIT_MS = 300_000  # a generation on a loaded 2-core machine


def _answered(stats: Locator) -> None:
    """Wait for the turn under way to end; it must have succeeded."""
    expect(stats).not_to_have_attribute("data-state", "streaming", timeout=WAIT_MS)
    assert stats.get_attribute("data-state") == "done", stats.inner_text()


@pytest.mark.zoo  # the tiny LM of tests.generation.lm_builder
def test_the_chat_page_streams_the_greedy_answer(
    service: ServiceProcess, browser: Browser, chat_model: str, tmp_path: Path
) -> None:
    token = service.admin_token
    assert token
    first = [{"role": "user", "content": "Hi"}]  # two turns fit the tiny LM's 64 tokens
    with service.client(token) as api:
        answer = api.post(
            "/v1/chat/completions",
            json={"model": chat_model, "messages": first, "max_tokens": 6, "temperature": 0},
        )
    assert answer.status_code == 200, answer.text
    expected = answer.json()
    page = new_page(browser)
    errors = script_errors(page)
    sent: list[Any] = []
    page.on("request", lambda r: sent.append(r) if "/chat/completions" in r.url else None)
    page.goto(f"{service.url}/#/chat")
    sign_in(page, token)
    page.click(f"#chat-models li[data-model='{chat_model}'] a", timeout=WAIT_MS)
    expect(page).to_have_url(re.compile(f"#/chat/{chat_model}$"))
    page.fill("#chat-max-tokens", "6")
    page.fill("#chat-input", first[0]["content"])
    page.press("#chat-input", "Enter")
    stats = page.locator("#chat-stats")
    _answered(stats)
    replies = page.locator("#chat-log [data-role=assistant] .chat-text")
    text = expected["choices"][0]["message"]["content"]
    assert replies.first.text_content() == text  # streamed, the API's greedy answer
    tokens = expected["usage"]["completion_tokens"]
    assert page.get_attribute("#chat-tokens", "data-value") == str(tokens)
    assert float(page.get_attribute("#chat-ttft", "data-value") or "nan") > 0
    if tokens > 1:
        assert float(page.get_attribute("#chat-tps", "data-value") or "nan") > 0
    shot(page, tmp_path, "chat")

    page.fill("#chat-input", "More")  # a second turn, in the same session
    page.click("#chat-send")
    expect(replies).to_have_count(2)
    _answered(stats)
    assert [r.method for r in sent] == ["POST", "POST"]
    bodies = [r.post_data_json for r in sent]
    assert bodies[0]["stream"] is True and bodies[0]["messages"] == first
    turns = [{"role": "assistant", "content": text}, {"role": "user", "content": "More"}]
    assert bodies[1]["messages"] == [*first, *turns]
    sessions = {r.headers.get("x-pteforge-session") for r in sent}
    assert len(sessions) == 1 and None not in sessions, sessions
    assert not errors, errors
