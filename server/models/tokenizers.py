"""Tokenizers attached to model versions: checked as plain JSON, then stored as content.

A tokenizer is an untrusted upload. The server only reads its JSON shape (``json.loads``
executes nothing): a Hugging Face ``tokenizer.json`` with a ``model`` whose ``vocab`` the
tokenizers libraries read, and an optional ``tokenizer_config.json`` object whose
``chat_template`` is a string (or Hugging Face's list of named templates). Tokenizing and
rendering the template happen only in the confined runtime workers.
"""

from __future__ import annotations

import json
from typing import Any

from pteforge.server.common.blob_files import store_file
from pteforge.server.common.services import Services
from pteforge.server.errors import InvalidUploadError, NotFoundError
from pteforge.server.http.uploads import MultipartUpload, UploadedPart
from pteforge.storage.domain import ModelTokenizer

TOKENIZER_PART = "tokenizer"
CONFIG_PART = "tokenizer_config"
MAX_TOKENIZER_BYTES = 64 * 1024 * 1024
"""The largest ``tokenizer.json`` taken (large vocabularies' files are about 10 MiB)."""
MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_UPLOAD_BYTES = MAX_TOKENIZER_BYTES + MAX_CONFIG_BYTES + 64 * 1024
"""The request body limit of a tokenizer upload (413 above it)."""
_MODEL_TYPES = {"BPE", "WordPiece", "WordLevel", "Unigram"}


def check_part_name(name: str) -> None:
    """Refuse a file part other than ``tokenizer`` and ``tokenizer_config`` (422)."""
    if name not in (TOKENIZER_PART, CONFIG_PART):
        raise InvalidUploadError(
            f"unexpected part {name[:40]!r}: a tokenizer upload has a {TOKENIZER_PART!r} part "
            f"(tokenizer.json) and optionally a {CONFIG_PART!r} part (tokenizer_config.json)"
        )


def _json_object(part: UploadedPart, limit: int) -> dict[str, Any]:
    if part.size_bytes > limit:
        raise InvalidUploadError(
            f"part {part.field_name!r} has {part.size_bytes} bytes; at most {limit} are taken"
        )
    try:
        value = json.loads(part.path.read_bytes())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidUploadError(f"part {part.field_name!r} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidUploadError(f"part {part.field_name!r} is not a JSON object")
    return value


def check_tokenizer_json(document: dict[str, Any]) -> None:
    """Refuse a document that is not a Hugging Face ``tokenizer.json`` (422 saying why)."""
    model = document.get("model")
    if not isinstance(model, dict):
        raise InvalidUploadError("part 'tokenizer' has no 'model' object: not a tokenizer.json")
    kind = model.get("type")
    if kind is not None and kind not in _MODEL_TYPES:
        raise InvalidUploadError(
            f"part 'tokenizer' has model type {str(kind)[:40]!r}; "
            f"one of {', '.join(sorted(_MODEL_TYPES))} is taken"
        )
    vocab = model.get("vocab")
    if not isinstance(vocab, dict | list) or not vocab:
        raise InvalidUploadError("part 'tokenizer' has no vocabulary ('model.vocab')")
    if not isinstance(document.get("added_tokens", []), list):
        raise InvalidUploadError("part 'tokenizer' has 'added_tokens' that is not a list")


def check_tokenizer_config(document: dict[str, Any]) -> None:
    """Refuse a ``tokenizer_config.json`` whose ``chat_template`` is neither a string nor a
    list of ``{"name", "template"}`` objects (422)."""
    template = document.get("chat_template")
    if template is None or isinstance(template, str):
        return
    named = isinstance(template, list) and all(
        isinstance(t, dict) and all(isinstance(t.get(key), str) for key in ("name", "template"))
        for t in template
    )
    if not named:
        raise InvalidUploadError(
            "part 'tokenizer_config' has a 'chat_template' that is neither a string nor a "
            'list of {"name", "template"} objects'
        )


def _parts(upload: MultipartUpload) -> tuple[UploadedPart, UploadedPart | None]:
    found = {part.field_name: part for part in upload.files}
    if len(found) != len(upload.files):
        raise InvalidUploadError("a part is repeated")
    if TOKENIZER_PART not in found:
        raise InvalidUploadError(f"no {TOKENIZER_PART!r} part (a tokenizer.json)")
    return found[TOKENIZER_PART], found.get(CONFIG_PART)


def _require_version(services: Services, project_id: str, name: str, version: int) -> None:
    with services.store.transaction(read_only=True) as tx:
        if tx.models.artifact_id(project_id, name, version) is None:
            raise NotFoundError(f"model {name!r} has no version {version}")


def attach_tokenizer(
    services: Services, project_id: str, name: str, version: int, upload: MultipartUpload
) -> ModelTokenizer:
    """Check the uploaded tokenizer (and config), store them and attach them to the version,
    replacing its tokenizer (404 for a version the project does not have; runs in a thread)."""
    tokenizer, config = _parts(upload)
    _require_version(services, project_id, name, version)
    check_tokenizer_json(_json_object(tokenizer, MAX_TOKENIZER_BYTES))
    if config is not None:
        check_tokenizer_config(_json_object(config, MAX_CONFIG_BYTES))
    stored = store_file(services.store.blobs, tokenizer.path)
    stored_config = None if config is None else store_file(services.store.blobs, config.path)
    with services.store.transaction() as tx:
        return tx.models.set_tokenizer(project_id, name, version, stored, stored_config)


def get_tokenizer(services: Services, project_id: str, name: str, version: int) -> ModelTokenizer:
    """The tokenizer attached to the version, or 404."""
    with services.store.transaction(read_only=True) as tx:
        found = tx.models.tokenizer(project_id, name, version)
    if found is None:
        raise NotFoundError(f"model {name!r} has no tokenizer at version {version}")
    return found
