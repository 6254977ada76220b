"""The checks of ``bench/lm_families.py`` against a real ``pteforge serve``: each check
returns True or a short reason, and a failing check never stops the others."""

from __future__ import annotations

import json
import os
import traceback
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import torch

from bench.lm_family_zoo import Family
from tests.generation.lm_builder import pte_greedy
from tests.server.model_names import deploy
from tests.server.service import running_service, temp_home

MAX = 12
PATHS = tuple(p for p in os.environ.get("LM_FAMILIES_PATHS", "").split(",") if p)
"""Export paths served besides the uploaded ``.pte``: ``compiled`` (the exported program
uploaded, pteforge compiles it) and ``edge`` (upstream's ``LLMEdgeManager``'s ``.pte``)."""
PROMPTS = ("The quick brown fox", "日本語のテキスト 😀 🚀 Café")
CHAT = [{"role": "user", "content": "What is the capital of France? 😀"}]
SYSTEM = [{"role": "system", "content": "Be brief."}, *CHAT]


class Lm:
    """One built family: files, references, and its deployment."""

    def __init__(self, family: Family, directory: Path) -> None:
        from bench.lm_families import eager_model, eos_ids, load_tokenizer

        self.family, self.dir = family, directory
        self.tok = load_tokenizer(directory)
        self.eos = eos_ids(family, self.tok)
        self.eager = eager_model(family, directory)
        self.metadata = json.loads((directory / "metadata.json").read_text())

    def pte(self, ids: list[int], n: int = MAX) -> list[int]:
        return pte_greedy(self.dir / "model.pte", ids, n, self.eos)

    def eager_greedy(self, ids: list[int], n: int = MAX) -> list[int]:
        x = torch.tensor([ids])
        with torch.no_grad():
            out = self.eager.generate(
                x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False,
                eos_token_id=self.eos, pad_token_id=self.eos[0],
            )  # fmt: skip
        return [int(t) for t in out[0, x.shape[1] :]]

    def chat_ids(self, messages: list[dict[str, str]]) -> list[int]:
        text = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(self.tok.encode(text, add_special_tokens=False))


def _compiled(admin: httpx.Client, lm: Lm) -> str:
    """The artifact pteforge compiles from the family's exported program (a ``.pt2``), the
    runner metadata as the plan's ``constant_methods``."""
    from tests.generation import lm_export
    from tests.server.helpers import compile_files

    archive = lm.dir / "forward.pt2"
    if not archive.exists():
        program = lm_export.export_lm(lm.eager, lm.metadata["get_max_seq_len"], dynamic=True)
        torch.export.save(program, archive)
    plan = {"all": {"partitioners": ["xnnpack"]}, "constant_methods": lm.metadata}
    return compile_files(admin, {"forward": archive}, f"fam-{lm.family.name}", plan)


def _deploy(admin: httpx.Client, lm: Lm, path: str = "pte") -> str:
    name = f"fam-{lm.family.name}" + ("" if path == "pte" else f"-{path}")
    if path == "compiled":
        artifact_id = _compiled(admin, lm)
    else:
        pte = (lm.dir / ("edge_manager.pte" if path == "edge" else "model.pte")).read_bytes()
        art = admin.post("/v1/artifacts", files={"pte": ("model.pte", pte)})
        artifact_id = art.raise_for_status().json()["id"]
    deploy(admin, name, artifact_id)
    admin.put(f"/v1/models/{name}/versions/1/tokenizer", files=_saved(lm)).raise_for_status()
    return name


def _saved(lm: Lm) -> dict[str, tuple[str, bytes]]:
    """The tokenizer's parts as ``transformers``' ``save_pretrained`` writes them (its chat
    template in ``chat_template.jinja``, not in ``tokenizer_config.json``)."""
    saved = lm.dir / "saved"
    lm.tok.save_pretrained(str(saved))
    files = {"tokenizer": "tokenizer.json", "tokenizer_config": "tokenizer_config.json"}
    if (saved / "chat_template.jinja").exists():
        files["chat_template"] = "chat_template.jinja"
    return {part: (file, (saved / file).read_bytes()) for part, file in files.items()}


def _ids(choice: Any) -> list[int]:
    return list(choice.to_dict().get("token_ids", []))


def _stream(client: openai.OpenAI, chat: bool, **kw: Any) -> tuple[str, list[int], Any]:
    make = client.chat.completions.create if chat else client.completions.create
    chunks = list(make(stream=True, **kw))
    choices = [c.choices[0] for c in chunks if c.choices]
    text = "".join((c.delta.content if chat else c.text) or "" for c in choices)
    finish = [c.finish_reason for c in choices if c.finish_reason]
    return text, [t for c in choices for t in _ids(c)], finish


class Checks:
    """The checks of one deployed family; each returns None (passed) or a note."""

    def __init__(self, lm: Lm, client: openai.OpenAI, admin: httpx.Client, model: str) -> None:
        self.lm, self.client, self.admin, self.model = lm, client, admin, model
        self.base: dict[str, Any] = {
            "model": model, "temperature": 0, "extra_body": {"return_token_ids": True},
        }  # fmt: skip

    def run(self, names: tuple[str, ...]) -> dict[str, Any]:
        """Each named check's result: True, a note, or ``FAIL ...``."""
        out: dict[str, Any] = {}
        for name in names:
            if name in _CHATS and self.lm.tok.chat_template is None:
                out[name] = "skipped: no chat template (pteforge renders its default)"
                continue
            try:
                result = getattr(self, name)()
                out[name] = True if result is None else result
            except Exception as exc:
                traceback.print_exc()
                out[name] = f"FAIL {type(exc).__name__}: {str(exc)[:300]}"
        return out

    def _complete(self, prompt: str, **kw: Any) -> Any:
        return self.client.completions.create(prompt=prompt, **{**self.base, **kw}).choices[0]

    def greedy_equal(self) -> Any:
        """pte == eager; HTTP whole and streamed carry those tokens, the same text."""
        notes = []
        for prompt in PROMPTS:
            ids = list(self.lm.tok.encode(prompt))
            want = self.lm.pte(ids)
            assert want == self.lm.eager_greedy(ids), f"pte {want} != eager"
            whole = self._complete(prompt, max_tokens=MAX)
            assert _ids(whole) == want, f"http {_ids(whole)} != {want}"
            text, streamed, _ = _stream(
                self.client, False, prompt=prompt, max_tokens=MAX, **self.base
            )
            assert streamed == want and text == whole.text, f"stream {streamed} {text!r}"
            if text != self.lm.tok.decode(want, skip_special_tokens=True):
                notes.append(f"text {text!r} != decode of all tokens (invalid UTF-8 bytes?)")
        return "; ".join(notes) or None

    def _chat(self, messages: list[dict[str, str]]) -> None:
        want = self.lm.pte(self.lm.chat_ids(messages))
        create = self.client.chat.completions.create
        whole = create(messages=messages, max_tokens=MAX, **self.base).choices[0]  # type: ignore[arg-type]
        assert _ids(whole) == want, f"chat {_ids(whole)} != {want}"
        text, streamed, _ = _stream(
            self.client, True, messages=messages, max_tokens=MAX, **self.base
        )
        assert streamed == want and text == whole.message.content, "stream differs"

    def thinking_off(self) -> Any:
        """``chat_template_kwargs`` {"enable_thinking": false}: apply_chat_template's prompt."""
        if "enable_thinking" not in (self.lm.tok.chat_template or ""):
            return "skipped: the template has no enable_thinking"
        text = self.lm.tok.apply_chat_template(
            CHAT, add_generation_prompt=True, tokenize=False, enable_thinking=False
        )
        want = self.lm.pte(list(self.lm.tok.encode(text, add_special_tokens=False)))
        extra = {**self.base["extra_body"], "chat_template_kwargs": {"enable_thinking": False}}
        base = {**self.base, "extra_body": extra}
        whole = self.client.chat.completions.create(messages=CHAT, max_tokens=MAX, **base)  # type: ignore[arg-type]
        assert _ids(whole.choices[0]) == want, f"{_ids(whole.choices[0])} != {want}"

    def chat(self) -> None:
        """The chat prompt is apply_chat_template's: the greedy tokens of those ids."""
        self._chat(CHAT)

    def chat_system(self) -> Any:
        """A system message: served, or the template's raise_exception as a 400."""
        if self.lm.family.system_ok:
            return self._chat(SYSTEM)
        try:
            self.client.chat.completions.create(messages=SYSTEM, max_tokens=2, **self.base)  # type: ignore[arg-type]
        except openai.BadRequestError as exc:
            assert "System role not supported" in str(exc), str(exc)
            return "400 from raise_exception, as the template says"
        raise AssertionError("a system message was accepted by a template that refuses it")

    def stop(self) -> Any:
        """A stop string from the middle of the greedy text cuts it there, finish 'stop'."""
        text = self._complete(PROMPTS[0], max_tokens=MAX).text
        if len(text.strip()) < 4:
            return f"skipped: text {text!r}"
        cut = text[len(text) // 2 : len(text) // 2 + 2]
        whole = self._complete(PROMPTS[0], stop=[cut], max_tokens=MAX)
        streamed, _, finish = _stream(
            self.client, False, prompt=PROMPTS[0], stop=[cut], max_tokens=MAX, **self.base
        )
        assert whole.text == text[: text.find(cut)] == streamed, f"{whole.text!r} {cut!r}"
        assert whole.finish_reason == "stop" and finish == ["stop"], f"{finish} {cut!r}"

    def context_limit(self) -> Any:
        """max_tokens up to the context: the pte's tokens; past it: cut at the context."""
        ids = list(self.lm.tok.encode(PROMPTS[0]))
        room = self.lm.metadata["get_max_seq_len"] - len(ids)
        want = self.lm.pte(ids, room)
        assert _ids(self._complete(PROMPTS[0], max_tokens=room)) == want
        over = self._complete(PROMPTS[0], max_tokens=room + 5)
        return f"past the context: {len(_ids(over))} tokens of {room} room, {over.finish_reason}"

    def empty_prompt(self) -> Any:
        """prompt "": the BOS alone, or a 400 for a tokenizer that adds none."""
        try:
            return f"200 with {_ids(self._complete('', max_tokens=4))}"
        except openai.APIStatusError as exc:
            return f"{exc.status_code}: {exc.message[:120]}"

    def session(self) -> Any:
        """A second turn in a session: the greedy tokens of the whole chat."""
        key = {"X-Pteforge-Session": uuid.uuid4().hex}
        create = self.client.chat.completions.create
        first = create(messages=CHAT, max_tokens=4, extra_headers=key, **self.base)  # type: ignore[arg-type]
        reply = {"role": "assistant", "content": first.choices[0].message.content or "x"}
        turn = [*CHAT, reply, {"role": "user", "content": "And Spain?"}]
        if len(self.lm.chat_ids(turn)) + 4 > self.lm.metadata["get_max_seq_len"]:
            return "skipped: the second turn does not fit this tiny context"
        want = self.lm.pte(self.lm.chat_ids(turn), 4)
        second = create(messages=turn, max_tokens=4, extra_headers=key, **self.base)  # type: ignore[arg-type]
        assert _ids(second.choices[0]) == want, f"{_ids(second.choices[0])} != {want}"

    def v2(self) -> None:
        """/v2 generate and generate_stream: the same text as /v1."""
        body = {"text_input": PROMPTS[1], "parameters": {"max_tokens": MAX, "temperature": 0}}
        url = f"/v2/models/{self.model}/generate"
        whole = self.admin.post(url, json=body).raise_for_status().json()["text_output"]
        assert whole == self._complete(PROMPTS[1], max_tokens=MAX).text
        with self.admin.stream("POST", f"{url}_stream", json=body) as answer:
            events = [json.loads(x[5:]) for x in answer.iter_lines() if x.startswith("data:")]
        assert "".join(e.get("text_output", "") for e in events) == whole


_CHATS = ("chat", "chat_system", "session", "thinking_off")
ALL = (
    "greedy_equal",
    "chat",
    "thinking_off",
    "chat_system",
    "stop",
    "context_limit",
    "empty_prompt",
    "session",
    "v2",
)
"""The checks of an uploaded .pte; other export paths run the first two."""


def check_served(built: dict[str, Path], families: dict[str, Family]) -> dict[str, Any]:
    """Start a server, deploy each family and run its :class:`Checks`."""
    results: dict[str, Any] = {}
    with running_service(temp_home("lm-families-")) as service:
        assert service.admin_token
        admin = service.client(service.admin_token)
        client = openai.OpenAI(
            base_url=f"{service.url}/v1", api_key=service.admin_token, max_retries=0
        )
        for name, directory in built.items():
            try:
                lm = Lm(families[name], directory)
                results[name] = Checks(lm, client, admin, _deploy(admin, lm)).run(ALL)
                for path in PATHS:
                    other = Checks(lm, client, admin, _deploy(admin, lm, path)).run(ALL[:2])
                    results[name].update({f"{path}_{k}": v for k, v in other.items()})
            except Exception as exc:
                traceback.print_exc()
                results[name] = {"serve": f"FAIL {type(exc).__name__}: {exc}"}
    return results
