"""Worker process: read an uploaded ``tokenizer.json`` (and ``tokenizer_config.json``) as JSON
and check its shape.

``json.loads`` executes nothing, but it holds the GIL for the whole parse and builds every
object first: a 64 MiB ``[[],[],...]`` costs seconds and about 1.5 GiB, which froze and
swelled the API server when it parsed uploads itself. Here it costs a disposable, memory-
and CPU-limited child. A Hugging Face ``tokenizer.json`` has a ``model`` whose ``vocab`` the
tokenizers libraries read; a config's ``chat_template`` is a string or Hugging Face's list of
named templates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import UploadRejectedError
from .specs import TokenizerCheck
from .worker_io import WorkerJob, worker_main

_MODEL_TYPES = {"BPE", "WordPiece", "WordLevel", "Unigram"}
_REASON = "invalid_tokenizer"


def _refuse(message: str) -> UploadRejectedError:
    return UploadRejectedError(_REASON, message)


def _json_object(path: str, part: str) -> dict[str, Any]:
    try:
        value = json.loads(Path(path).read_bytes())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _refuse(f"part {part!r} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _refuse(f"part {part!r} is not a JSON object")
    return value


def check_tokenizer_json(document: dict[str, Any]) -> None:
    """Refuse a document that is not a Hugging Face ``tokenizer.json``, saying why."""
    model = document.get("model")
    if not isinstance(model, dict):
        raise _refuse("part 'tokenizer' has no 'model' object: not a tokenizer.json")
    kind = model.get("type")
    if kind is not None and kind not in _MODEL_TYPES:
        raise _refuse(
            f"part 'tokenizer' has model type {str(kind)[:40]!r}; "
            f"one of {', '.join(sorted(_MODEL_TYPES))} is taken"
        )
    vocab = model.get("vocab")
    if not isinstance(vocab, dict | list) or not vocab:
        raise _refuse("part 'tokenizer' has no vocabulary ('model.vocab')")
    if not isinstance(document.get("added_tokens", []), list):
        raise _refuse("part 'tokenizer' has 'added_tokens' that is not a list")


def token_ids(document: dict[str, Any]) -> int | None:
    """The highest token id of a checked ``tokenizer.json`` plus one: of its vocabulary (a
    ``{token: id}`` object, or Unigram's list, whose ids are its positions) and of its
    ``added_tokens``; None when it names no id."""
    vocab = document["model"]["vocab"]
    ids: list[Any] = list(vocab.values()) if isinstance(vocab, dict) else []
    ids += [t.get("id") for t in document.get("added_tokens", []) if isinstance(t, dict)]
    highest = max((i for i in ids if type(i) is int), default=-1)
    count = max(highest + 1, len(vocab) if isinstance(vocab, list) else 0)
    return count or None


def check_tokenizer_config(document: dict[str, Any]) -> None:
    """Refuse a ``tokenizer_config.json`` whose ``chat_template`` is neither a string nor a
    list of ``{"name", "template"}`` objects."""
    template = document.get("chat_template")
    if template is None or isinstance(template, str):
        return
    named = isinstance(template, list) and all(
        isinstance(t, dict) and all(isinstance(t.get(key), str) for key in ("name", "template"))
        for t in template
    )
    if not named:
        raise _refuse(
            "part 'tokenizer_config' has a 'chat_template' that is neither a string nor a "
            'list of {"name", "template"} objects'
        )


def _job(argv: list[str]) -> TokenizerCheck:
    """``argv``: the tokenizer's path, then optionally the config's."""
    tokenizer = _json_object(argv[0], "tokenizer")
    check_tokenizer_json(tokenizer)
    ids = token_ids(tokenizer)
    if len(argv) == 1:
        return TokenizerCheck(1, token_ids=ids)
    config = _json_object(argv[1], "tokenizer_config")
    check_tokenizer_config(config)
    return TokenizerCheck(2, len(config), "chat_template" in config, ids)


JOB = WorkerJob(_job, failure_reason=_REASON)

if __name__ == "__main__":
    worker_main(JOB)
