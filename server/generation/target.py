"""What a request's ``model`` names: a model version's ``.pte`` and its tokenizer.

``model`` is a model name from ``/v1/models`` (its latest version) or ``name:version``; the
``/v2`` generate routes name the version in their path instead. A resolved target is
remembered for a while (``target_of``), like ``/v2``'s resolved artifacts, and forgotten as
soon as this server changes the model (``forget_target``).
Everything is read in one query (``tx.models.served``), within the caller's project, so the
program and the tokenizer are of the same version even while a new version is added.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from starlette.concurrency import run_in_threadpool

from pteforge.runtime.artifact_files import ArtifactSource
from pteforge.server.auth.cache import TtlCache
from pteforge.server.common.program_source import program_source, stored_writer
from pteforge.server.generation.errors import OpenAIError
from pteforge.storage.domain import BlobRef
from pteforge.storage.store import Store

BlobSource = tuple[str, Callable[[Path], None]]
"""A stored file as the pool takes it: its sha256 and a function writing it to a path."""


@dataclass(frozen=True)
class Target:
    """The files one generation runs on."""

    name: str
    version: int
    program: tuple[str, ArtifactSource]  # its identity and source (``program_source``)
    tokenizer: BlobSource
    tokenizer_config: BlobSource | None


def blob_source(store: Store, blob: BlobRef) -> BlobSource:
    """``blob`` as the pool takes it: verified against its sha256 while it is copied."""

    return blob.sha256, stored_writer(store.blobs, blob.sha256)


def parse_model(model: str) -> tuple[str, int | None]:
    """``name`` or ``name:version`` (400 for a version that is not a number)."""
    name, colon, version = model.partition(":")
    if not colon:
        return name, None
    if not (version.isascii() and version.isdigit()):  # int() refuses some isdigit() takes
        raise OpenAIError(
            400, f"model {model!r}: the version after ':' must be a number", "model", None
        )
    return name, int(version)


def resolve_version(store: Store, project_id: str, name: str, asked: int | None) -> Target:
    """The files of version ``asked`` of model ``name`` (None: its latest): 404
    ``model_not_found``; 400 when it has no tokenizer. Runs in a worker thread."""
    with store.transaction(read_only=True) as tx:
        served = tx.models.served(project_id, name, asked)
        known = [] if served or asked is None else tx.models.versions(project_id, name)
    if served is None:
        message = f"The model {name!r} does not exist"
        if known:
            listed = ", ".join(str(v.version) for v in known)
            message = f"The model {name!r} has no version {asked} (its versions: {listed})"
        raise OpenAIError(404, message, "model", "model_not_found")
    version, tokenizer = served.version, served.tokenizer
    if tokenizer is None:
        raise OpenAIError(
            400,
            f"model {name!r} version {version} has no tokenizer: attach one with "
            f"PUT /v1/models/{name}/versions/{version}/tokenizer",
            "model",
            "tokenizer_missing",
        )
    config = tokenizer.config
    return Target(
        name=name,
        version=version,
        program=program_source(store.blobs, served.program.sha256, served.data),
        tokenizer=blob_source(store, tokenizer.tokenizer),
        tokenizer_config=None if config is None else blob_source(store, config),
    )


TargetCache = TtlCache[tuple[str, str, int | None], Target]
"""Resolved targets by (project id, model name, version; None: the latest)."""


async def target_of(
    cache: TargetCache, store: Store, project_id: str, name: str, asked: int | None
) -> Target:
    """:func:`resolve_version` in the threadpool, remembered in ``cache`` for its time to live
    (a hit costs no query and no thread hop: the lookup was most of a stream's time to first
    token). A version added, deleted or given a tokenizer through this server is forgotten
    at once (``forget_target``), so it serves at once; through another replica it takes
    effect within the time to live, as for ``/v2``'s artifacts. Refusals are not remembered."""
    key = (project_id, name, asked)
    cached = cache.get(key)
    if cached is not None:
        return cached
    target = await run_in_threadpool(resolve_version, store, project_id, name, asked)
    cache.put(key, target)
    return target


def forget_target(cache: TargetCache, project_id: str, name: str, version: int) -> None:
    """Forget what ``cache`` holds for ``version`` of model ``name`` and for its latest
    version (which it may be, or have become): called once a change is committed."""
    cache.discard((project_id, name, version))
    cache.discard((project_id, name, None))
