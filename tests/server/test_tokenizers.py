"""Tokenizers attached to model versions over real HTTP: stored as content, read back,
replaced, project-scoped; a file that is not a tokenizer.json is refused naming why."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
import pytest

from tests.server.helpers import assert_error, peak_growth_kib
from tests.server.model_names import deploy, upload_scales
from tests.server.service import ServiceProcess

CONFIG = json.dumps({"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"})


def _tokenizer_json() -> bytes:
    """A small byte-level BPE tokenizer.json trained here."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=alphabet)
    tokenizer.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 4, trainer)
    return tokenizer.to_str().encode()


@pytest.fixture(scope="module")
def version(admin: httpx.Client) -> str:
    """The path of version 1 of model ``tok``."""
    deploy(admin, "tok", upload_scales(admin, [1.0])[1.0])
    return "/v1/models/tok/versions/1"


def _put(client: httpx.Client, path: str, **parts: bytes) -> httpx.Response:
    files = {name: (f"{name}.json", data) for name, data in parts.items()}
    return client.put(f"{path}/tokenizer", files=files)


def test_a_tokenizer_is_stored_read_back_and_replaced(admin: httpx.Client, version: str) -> None:
    assert_error(admin.get(f"{version}/tokenizer"), 404, "not_found")
    tokenizer = _tokenizer_json()
    answer = _put(admin, version, tokenizer=tokenizer, tokenizer_config=CONFIG.encode())
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    assert (created["model"], created["version"]) == ("tok", 1)
    assert created["tokenizer"]["size_bytes"] == len(tokenizer)
    assert created["tokenizer_config"]["size_bytes"] == len(CONFIG)
    assert admin.get(f"{version}/tokenizer").json() == created
    replaced = _put(admin, version, tokenizer=tokenizer)
    assert replaced.status_code == 201 and replaced.json()["tokenizer_config"] is None


@pytest.mark.parametrize(
    ("parts", "words"),
    [
        ({"tokenizer": b"\xff\xfe not json"}, "not JSON"),
        ({"tokenizer": b"[1, 2]"}, "not a JSON object"),
        ({"tokenizer": b'{"vocab": {}}'}, "no 'model' object"),
        ({"tokenizer": b'{"model": {"type": "BPE", "vocab": {}}}'}, "no vocabulary"),
        ({"tokenizer": b'{"model": {"type": "Tiktoken", "vocab": {"a": 0}}}'}, "model type"),
        ({"tokenizer_config": CONFIG.encode()}, "no 'tokenizer' part"),
        ({"tokenizer": b"{}", "merges": b"x"}, "unexpected part 'merges'"),
    ],
)
def test_what_is_not_a_tokenizer_is_refused(
    admin: httpx.Client, version: str, parts: dict[str, bytes], words: str
) -> None:
    answer = _put(admin, version, **parts)
    assert_error(answer, 422, "invalid_upload")
    assert words in answer.json()["error"]["message"]


def test_a_chat_template_must_be_text(admin: httpx.Client, version: str) -> None:
    config = json.dumps({"chat_template": {"not": "text"}}).encode()
    answer = _put(admin, version, tokenizer=_tokenizer_json(), tokenizer_config=config)
    assert_error(answer, 422, "invalid_upload")
    assert "chat_template" in answer.json()["error"]["message"]


def test_a_chat_template_file_is_stored_as_the_configs_template(
    admin: httpx.Client, version: str
) -> None:
    """transformers saves the template as ``chat_template.jinja`` and leaves it out of
    ``tokenizer_config.json`` (models pass: such a tokenizer's chats silently used the
    default ``role: content`` template): the part is stored in the config."""
    template = "{% for m in messages %}{{ m.content }} ☕\n{% endfor %}"
    config = b'{"eos_token": "</s>"}\n'
    parts = {"tokenizer": _tokenizer_json(), "chat_template": template.encode()}
    entry = json.dumps({"chat_template": template}, ensure_ascii=False)[1:-1].encode()
    for given, stored in ((config, config[:-2] + b"," + entry + b"}"), (None, b"{" + entry + b"}")):
        answer = _put(admin, version, **parts, **({"tokenizer_config": given} if given else {}))
        assert answer.status_code == 201, answer.text
        assert answer.json()["tokenizer_config"]["sha256"] == hashlib.sha256(stored).hexdigest()
        assert json.loads(stored)["chat_template"] == template
    both = _put(admin, version, **parts, tokenizer_config=CONFIG.encode())
    assert_error(both, 422, "invalid_upload")
    assert "send one of them" in both.json()["error"]["message"]
    binary = _put(admin, version, tokenizer=_tokenizer_json(), chat_template=b"\xff{{ x }}")
    assert_error(binary, 422, "invalid_upload")
    assert "not UTF-8" in binary.json()["error"]["message"]


def test_tokenizers_are_project_scoped(
    service: ServiceProcess, admin: httpx.Client, version: str
) -> None:
    assert_error(_put(admin, "/v1/models/tok/versions/9", tokenizer=b"{}"), 404, "not_found")
    token = service.create_token("tokenizer-outsider", "tokenizer-other-project")
    with service.client(token) as outsider:
        assert_error(_put(outsider, version, tokenizer=_tokenizer_json()), 404, "not_found")
        assert_error(outsider.get(f"{version}/tokenizer"), 404, "not_found")
    with service.client() as anonymous:
        assert_error(anonymous.get(f"{version}/tokenizer"), 401, "unauthorized")


def test_the_server_does_not_parse_a_tokenizer_itself(
    service: ServiceProcess, admin: httpx.Client, version: str
) -> None:
    """An 8 MB ``[[],[],...]`` vocabulary is ~170 MB of Python lists once parsed (64 MiB,
    the largest taken, about 1.5 GiB and seconds holding the GIL): the server process parsed
    uploads itself and grew by that much; the sandbox child reads it now."""
    bomb = b'{"model": {"vocab": [' + b",".join([b"[]"] * 2_700_000) + b"]}}"
    answer, grown = peak_growth_kib(service.proc.pid, lambda: _put(admin, version, tokenizer=bomb))
    assert answer.status_code == 201, answer.text
    assert grown < 64 * 1024


def test_a_tokenizer_for_another_vocabulary_is_refused(admin: httpx.Client) -> None:
    """A tokenizer with more token ids than the language model's vocabulary was attached,
    and its prompts then failed one by one, or ran, depending on the text; a smaller one
    (Qwen's tokenizers are, against their padded embeddings) is taken."""
    import torch
    from executorch.exir import to_edge

    class Lm(torch.nn.Module):  # runner metadata is what describes a language model
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    metadata = {"get_max_seq_len": 8, "get_vocab_size": 64}
    exported = torch.export.export(Lm(), (torch.ones(1, 64),))
    pte = bytes(to_edge(exported, constant_methods=metadata).to_executorch().buffer)
    answer = admin.post("/v1/artifacts", files={"pte": ("lm.pte", pte)})
    assert answer.status_code == 201 and answer.json()["generation"]["vocab_size"] == 64
    deploy(admin, "tok-vocab", answer.json()["id"])
    path = "/v1/models/tok-vocab/versions/1"
    refused = _put(admin, path, tokenizer=_tokenizer_json())
    assert_error(refused, 422, "invalid_upload")
    assert "vocabulary has 64 tokens" in refused.json()["error"]["message"]
    small = {"model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1}}, "added_tokens": []}
    assert _put(admin, path, tokenizer=json.dumps(small).encode()).status_code == 201
    small["added_tokens"] = [{"id": 64, "content": "<extra>"}]
    assert _put(admin, path, tokenizer=json.dumps(small).encode()).status_code == 422
