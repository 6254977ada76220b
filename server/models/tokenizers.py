"""Tokenizers attached to model versions: checked as plain JSON, then stored as content.

A tokenizer is an untrusted upload. The server stores its bytes; a disposable sandbox child
(:mod:`pteforge.server.sandbox.tokenizer_worker`) reads them as JSON and checks their shape
(a Hugging Face ``tokenizer.json`` with a ``model`` whose ``vocab`` the tokenizers libraries
read, and an optional ``tokenizer_config.json`` object whose ``chat_template`` is a string or
Hugging Face's list of named templates). Tokenizing and rendering the template happen only
in the confined runtime workers.

``transformers`` saves a tokenizer's chat template as its own file, ``chat_template.jinja``,
and leaves it out of ``tokenizer_config.json``: an optional ``chat_template`` part takes that
file, and the config is stored with it as its ``chat_template`` (added as text after the
child's check, so the server still parses no upload).
"""

from __future__ import annotations

import json
from pathlib import Path

from pteforge.server.artifacts.schemas import GENERATION_KEY
from pteforge.server.common.blob_files import check_quota, store_project_files
from pteforge.server.common.services import Services
from pteforge.server.errors import InvalidUploadError, NotFoundError
from pteforge.server.http.uploads import MultipartUpload, UploadedPart
from pteforge.server.sandbox.errors import UploadRejectedError
from pteforge.server.sandbox.isolation import read_result
from pteforge.server.sandbox.specs import TokenizerCheck
from pteforge.storage.domain import ModelTokenizer

TOKENIZER_PART = "tokenizer"
CONFIG_PART = "tokenizer_config"
TEMPLATE_PART = "chat_template"
_PARTS = (TOKENIZER_PART, CONFIG_PART, TEMPLATE_PART)
MAX_TOKENIZER_BYTES = 64 * 1024 * 1024
"""The largest ``tokenizer.json`` taken (large vocabularies' files are about 10 MiB)."""
MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_UPLOAD_BYTES = MAX_TOKENIZER_BYTES + 2 * MAX_CONFIG_BYTES + 64 * 1024
"""The request body limit of a tokenizer upload (413 above it)."""
_WORKER = "pteforge.server.sandbox.tokenizer_worker"


def check_part_name(name: str) -> None:
    """Refuse a file part other than ``tokenizer``, ``tokenizer_config`` and
    ``chat_template`` (422)."""
    if name not in _PARTS:
        raise InvalidUploadError(
            f"unexpected part {name[:40]!r}: a tokenizer upload has a {TOKENIZER_PART!r} part "
            f"(tokenizer.json) and optionally a {CONFIG_PART!r} part (tokenizer_config.json) "
            f"and a {TEMPLATE_PART!r} part (chat_template.jinja)"
        )


def _check_size(part: UploadedPart, limit: int) -> None:
    if part.size_bytes > limit:
        raise InvalidUploadError(
            f"part {part.field_name!r} has {part.size_bytes} bytes; at most {limit} are taken"
        )


def _check_shape(
    services: Services, tokenizer: UploadedPart, config: UploadedPart | None
) -> TokenizerCheck:
    """Read the parts as JSON in a disposable child (:mod:`.tokenizer_worker`): a 422 saying
    what is wrong with them, or what stopped the child (its memory or its time)."""
    _check_size(tokenizer, MAX_TOKENIZER_BYTES)
    if config is not None:
        _check_size(config, MAX_CONFIG_BYTES)
    paths = [str(p.path.resolve()) for p in (tokenizer, config) if p is not None]
    try:
        reply = services.isolation.run(_WORKER, paths, services.process_limits)
        return read_result(TokenizerCheck, reply)
    except UploadRejectedError as exc:
        raise InvalidUploadError(exc.message) from None


def _utf8(part: UploadedPart, codec: str = "utf-8") -> str:
    try:
        return part.path.read_bytes().decode(codec)
    except UnicodeDecodeError as exc:
        raise InvalidUploadError(f"part {part.field_name!r} is not UTF-8 text: {exc}") from None


def _config_with_template(
    config: UploadedPart | None, template: UploadedPart, check: TokenizerCheck
) -> Path:
    """The config (checked a JSON object by the child) with ``template``'s text as its
    ``chat_template``, written beside the uploaded parts."""
    _check_size(template, MAX_CONFIG_BYTES)
    if check.config_has_template:
        raise InvalidUploadError(
            f"part {CONFIG_PART!r} has a chat_template and a {TEMPLATE_PART!r} part came "
            "too: send one of them"
        )
    entry = json.dumps({"chat_template": _utf8(template)}, ensure_ascii=False)[1:-1]
    if config is None:
        merged = "{" + entry + "}"
    else:  # a JSON object's text ends with "}"
        head = _utf8(config, "utf-8-sig").rstrip()[:-1]
        merged = head + ("," if check.config_keys else "") + entry + "}"
    path = template.path.with_name("tokenizer_config.merged.json")
    path.write_text(merged, encoding="utf-8")
    return path


def _parts(
    upload: MultipartUpload,
) -> tuple[UploadedPart, UploadedPart | None, UploadedPart | None]:
    found = {part.field_name: part for part in upload.files}
    if len(found) != len(upload.files):
        raise InvalidUploadError("a part is repeated")
    if TOKENIZER_PART not in found:
        raise InvalidUploadError(f"no {TOKENIZER_PART!r} part (a tokenizer.json)")
    return found[TOKENIZER_PART], found.get(CONFIG_PART), found.get(TEMPLATE_PART)


def _model_vocabulary(services: Services, project_id: str, name: str, version: int) -> int | None:
    """The vocabulary of the language model the version serves (its ``get_vocab_size``,
    else the last dimension of its logits), None for an artifact that is not one; 404 for a
    version the project does not have."""
    with services.store.transaction(read_only=True) as tx:
        artifact_id = tx.models.artifact_id(project_id, name, version)
        artifact = None if artifact_id is None else tx.artifacts.get(project_id, artifact_id)
    if artifact is None:
        raise NotFoundError(f"model {name!r} has no version {version}")
    generation = artifact.report.get(GENERATION_KEY)
    if not isinstance(generation, dict):
        return None
    if isinstance(generation.get("vocab_size"), int):
        return int(generation["vocab_size"])
    method = next((m for m in artifact.methods if m.name == generation.get("method")), None)
    logits = None if method is None or not method.outputs else method.outputs[0]
    last = (logits.max_shape or logits.shape)[-1] if logits and logits.shape else 0
    return last if last > 0 else None


def _check_vocabulary(check: TokenizerCheck, vocabulary: int | None) -> None:
    """Refuse a tokenizer with token ids the model has no logits and embeddings for (422):
    its prompts would fail, or worse, run on rows that are not theirs."""
    if vocabulary is not None and check.token_ids is not None and check.token_ids > vocabulary:
        raise InvalidUploadError(
            f"part {TOKENIZER_PART!r} has token ids up to {check.token_ids - 1}, but the "
            f"model's vocabulary has {vocabulary} tokens (ids 0 to {vocabulary - 1}): it is a "
            "tokenizer for another model"
        )


def attach_tokenizer(
    services: Services, project_id: str, name: str, version: int, upload: MultipartUpload
) -> ModelTokenizer:
    """Check the uploaded tokenizer (and config, and chat template), store them and attach
    them to the version, replacing its tokenizer (404 for a version the project does not
    have; runs in a thread)."""
    tokenizer, config, template = _parts(upload)
    vocabulary = _model_vocabulary(services, project_id, name, version)
    check = _check_shape(services, tokenizer, config)
    _check_vocabulary(check, vocabulary)
    config_path = None if config is None else config.path
    if template is not None:
        config_path = _config_with_template(config, template, check)
    paths = [tokenizer.path] if config_path is None else [tokenizer.path, config_path]
    stored, *config_blob = store_project_files(services.store, services.settings, project_id, paths)
    stored_config = config_blob[0] if config_blob else None
    with services.store.transaction() as tx:
        check_quota(tx, services.settings, project_id, sum(b.size for b in [stored, *config_blob]))
        attached = tx.models.set_tokenizer(project_id, name, version, stored, stored_config)
    services.model_changed(project_id, name, version)
    return attached


def get_tokenizer(services: Services, project_id: str, name: str, version: int) -> ModelTokenizer:
    """The tokenizer attached to the version, or 404."""
    with services.store.transaction(read_only=True) as tx:
        found = tx.models.tokenizer(project_id, name, version)
    if found is None:
        raise NotFoundError(f"model {name!r} has no tokenizer at version {version}")
    return found
