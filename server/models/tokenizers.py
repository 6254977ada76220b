"""Tokenizers attached to model versions: checked as plain JSON, then stored as content.

A tokenizer is an untrusted upload. The server stores its bytes; a disposable sandbox child
(:mod:`pteforge.server.sandbox.tokenizer_worker`) reads them as JSON and checks their shape
(a Hugging Face ``tokenizer.json`` with a ``model`` whose ``vocab`` the tokenizers libraries
read, and an optional ``tokenizer_config.json`` object whose ``chat_template`` is a string or
Hugging Face's list of named templates). Tokenizing and rendering the template happen only
in the confined runtime workers.
"""

from __future__ import annotations

from pteforge.server.common.blob_files import store_file
from pteforge.server.common.services import Services
from pteforge.server.errors import InvalidUploadError, NotFoundError
from pteforge.server.http.uploads import MultipartUpload, UploadedPart
from pteforge.server.sandbox.errors import UploadRejectedError
from pteforge.server.sandbox.isolation import read_result
from pteforge.server.sandbox.specs import TokenizerCheck
from pteforge.storage.domain import ModelTokenizer

TOKENIZER_PART = "tokenizer"
CONFIG_PART = "tokenizer_config"
MAX_TOKENIZER_BYTES = 64 * 1024 * 1024
"""The largest ``tokenizer.json`` taken (large vocabularies' files are about 10 MiB)."""
MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_UPLOAD_BYTES = MAX_TOKENIZER_BYTES + MAX_CONFIG_BYTES + 64 * 1024
"""The request body limit of a tokenizer upload (413 above it)."""
_WORKER = "pteforge.server.sandbox.tokenizer_worker"


def check_part_name(name: str) -> None:
    """Refuse a file part other than ``tokenizer`` and ``tokenizer_config`` (422)."""
    if name not in (TOKENIZER_PART, CONFIG_PART):
        raise InvalidUploadError(
            f"unexpected part {name[:40]!r}: a tokenizer upload has a {TOKENIZER_PART!r} part "
            f"(tokenizer.json) and optionally a {CONFIG_PART!r} part (tokenizer_config.json)"
        )


def _check_size(part: UploadedPart, limit: int) -> None:
    if part.size_bytes > limit:
        raise InvalidUploadError(
            f"part {part.field_name!r} has {part.size_bytes} bytes; at most {limit} are taken"
        )


def _check_shape(services: Services, tokenizer: UploadedPart, config: UploadedPart | None) -> None:
    """Read the parts as JSON in a disposable child (:mod:`.tokenizer_worker`): a 422 saying
    what is wrong with them, or what stopped the child (its memory or its time)."""
    _check_size(tokenizer, MAX_TOKENIZER_BYTES)
    if config is not None:
        _check_size(config, MAX_CONFIG_BYTES)
    paths = [str(p.path.resolve()) for p in (tokenizer, config) if p is not None]
    try:
        reply = services.isolation.run(_WORKER, paths, services.process_limits)
        read_result(TokenizerCheck, reply)
    except UploadRejectedError as exc:
        raise InvalidUploadError(exc.message) from None


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
    _check_shape(services, tokenizer, config)
    stored = store_file(services.store.blobs, tokenizer.path)
    stored_config = None if config is None else store_file(services.store.blobs, config.path)
    with services.store.transaction() as tx:
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
