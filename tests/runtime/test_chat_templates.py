"""Chat templates as the worker renders them: the default one and a tokenizer config's, in
Jinja2's sandbox (unsafe or broken ones refused, a render bounded in time), with what
``transformers``' ``apply_chat_template`` gives them. No model needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pteforge.contracts.generation import ChatMessage, GenerationRequest
from pteforge.runtime import text_codec
from pteforge.runtime.errors import TokenizerError
from pteforge.runtime.text_codec import TextCodec


def test_default_and_configured_chat_templates(byte_tokenizer: Path, tmp_path: Path) -> None:
    chat = (ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="yo"))
    assert TextCodec(byte_tokenizer, None).render(chat) == "user: hi\nassistant: yo\nassistant:"
    config = tmp_path / "tokenizer_config.json"
    template = "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    config.write_text(json.dumps({"chat_template": template, "bos_token": {"content": "<s>"}}))
    codec = TextCodec(byte_tokenizer, config)
    assert codec.render(chat) == "<s><user>hi<assistant>yo"
    request = GenerationRequest(messages=chat)
    assert codec.decode(codec.prompt_ids(request, 64)) == "<s><user>hi<assistant>yo"


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ messages.append(1) }}",
        "{{ raise_exception('no system role') }}",
        "{% for m in messages %}",
        # nested 100000 deep: json.dumps and repr raised RecursionError, not a refusal
        "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}"
        "{% endfor %}{{ ns.x | tojson }}",
    ],
)
def test_unsafe_or_broken_templates_are_refused(
    byte_tokenizer: Path, tmp_path: Path, template: str
) -> None:
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": template}))
    with pytest.raises(TokenizerError, match="chat template"):
        TextCodec(byte_tokenizer, config).render((ChatMessage(role="user", content="hi"),))


def test_a_template_looping_without_output_stops_at_its_deadline(
    byte_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10**10 empty iterations: no output to count, so the render's deadline stops it (the
    worker's main thread; 10 s there, half a second here)."""
    monkeypatch.setattr(text_codec, "RENDER_SECONDS", 0.5)
    config = tmp_path / "tokenizer_config.json"
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    config.write_text(json.dumps({"chat_template": loops}))
    codec = TextCodec(byte_tokenizer, config)
    with pytest.raises(TokenizerError, match=r"chat template failed: it renders for over 0\.5 s"):
        codec.render((ChatMessage(role="user", content="hi"),))
    assert codec.encode("plain", special=False)  # the alarm is off again


HF_STYLE = (
    "{% generation %}{% for m in messages %}{% if m.role == 'skip' %}{% continue %}{% endif %}"
    "{{ m.content | tojson }}{% if m.role == 'assistant' %}{% break %}{% endif %}{% endfor %}"
    "{% endgeneration %}|{{ {'k': '<é>'} | tojson(indent=1) }}|{{ tools is none }}|"
    "{{ strftime_now('%Y') }}"
)


def test_templates_get_what_transformers_gives_them(byte_tokenizer: Path, tmp_path: Path) -> None:
    """Loop controls, the ``{% generation %}`` block, a ``tojson`` that keeps non-ASCII and
    ``<``, ``tools`` as None and ``strftime_now``, as in ``apply_chat_template`` (models
    pass: each was a 'chat template failed' 400, or a different prompt)."""
    from datetime import datetime

    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": HF_STYLE}))
    roles = ("user", "skip", "assistant", "user")
    chat = tuple(ChatMessage(role=r, content=f"{r} ☕") for r in roles)
    year = datetime.now().strftime("%Y")
    expected = f'"user ☕""assistant ☕"|{{\n "k": "<é>"\n}}|True|{year}'
    assert TextCodec(byte_tokenizer, config).render(chat) == expected


def test_a_request_adds_variables_to_the_template(byte_tokenizer: Path, tmp_path: Path) -> None:
    """``chat_template_kwargs`` (vLLM's extension): Qwen3's template leaves its thinking out
    with ``enable_thinking`` false, and ``add_generation_prompt`` may be turned off."""
    config = tmp_path / "tokenizer_config.json"
    template = (
        "{{ messages[0].content }}{% if add_generation_prompt %}|A:{% endif %}"
        "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% endif %}"
    )
    config.write_text(json.dumps({"chat_template": template}))
    codec = TextCodec(byte_tokenizer, config)
    chat = (ChatMessage(role="user", content="hi"),)
    assert codec.render(chat) == "hi|A:"
    assert codec.render(chat, {"enable_thinking": False}) == "hi|A:<think></think>"
    assert codec.render(chat, {"add_generation_prompt": False}) == "hi"
    with pytest.raises(ValueError, match="chat"):
        GenerationRequest(prompt="hi", template_kwargs={"enable_thinking": False})
    with pytest.raises(ValueError, match="replace the messages"):
        GenerationRequest(messages=chat, template_kwargs={"messages": []})
