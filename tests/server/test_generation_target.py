"""Generation targets: a model version's, and a model's latest, are remembered for the resolve
cache's time to live, as /v2 remembers a pinned version's artifact, unless the server changed
the model meanwhile (``forget_target``); refusals are looked up on every request (on a real
SQLite store, with a clock moved by hand)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from pteforge.server.auth.cache import TtlCache
from pteforge.server.generation.errors import OpenAIError
from pteforge.server.generation.target import Target, TargetCache, forget_target, target_of
from pteforge.storage import SqlStore, default_sqlite_url, open_store
from pteforge.storage.domain import BlobRef


@dataclass
class ManualClock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def _version(store: SqlStore, project_id: str, tokenizer: BlobRef | None) -> int:
    """A new version of model ``lm`` in the project, with ``tokenizer`` attached if given."""
    blob = store.blobs.write([os.urandom(64)])
    with store.transaction() as tx:
        artifact = tx.artifacts.create(project_id, None, blob, {}, "test", {}, [])
        version = tx.models.add_version(project_id, "lm", artifact.id).version
        if tokenizer is not None:
            tx.models.set_tokenizer(project_id, "lm", version, tokenizer, None)
    return version


def _target(cache: TargetCache, store: SqlStore, project_id: str, asked: int | None) -> Target:
    return asyncio.run(target_of(cache, store, project_id, "lm", asked))


def _refused(cache: TargetCache, store: SqlStore, project_id: str, asked: int | None) -> str:
    with pytest.raises(OpenAIError) as raised:
        _target(cache, store, project_id, asked)
    return str(raised.value.code)


def test_a_pinned_target_is_remembered_until_its_ttl_passes(tmp_path: Path) -> None:
    store = open_store(default_sqlite_url(tmp_path / "home"))
    try:
        with store.transaction() as tx:
            project, stranger = tx.projects.create("p").id, tx.projects.create("q").id
        first, second = store.blobs.write([b'{"model": {}}']), store.blobs.write([b'{"m": {}}'])
        clock = ManualClock()
        cache: TargetCache = TtlCache(1.0, clock=clock)
        assert [_version(store, project, first), _version(store, project, first)] == [1, 2]
        assert _target(cache, store, project, 1).tokenizer[0] == first.sha256
        assert _target(cache, store, project, None).version == 2
        with store.transaction() as tx:
            tx.models.set_tokenizer(project, "lm", 1, second, None)
            tx.models.delete_version(project, "lm", 2)
        assert _target(cache, store, project, 1).tokenizer[0] == first.sha256  # remembered
        assert _target(cache, store, project, None).version == 2  # remembered too
        forget_target(cache, project, "lm", 2)  # as the server does once it deleted it
        latest = _target(cache, store, project, None)  # looked up: version 2 went at once
        assert (latest.version, latest.tokenizer[0]) == (1, second.sha256)
        assert _refused(cache, store, stranger, 1) == "model_not_found"
        clock.now += 1.0
        assert _target(cache, store, project, 1).tokenizer[0] == second.sha256
        assert _version(store, project, None) == 3
        assert _refused(cache, store, project, 3) == "tokenizer_missing"
        with store.transaction() as tx:
            tx.models.set_tokenizer(project, "lm", 3, first, None)
        assert _target(cache, store, project, 3).version == 3  # the refusal was not kept
    finally:
        store.close()


def test_a_missing_version_is_named_with_the_versions_there_are(tmp_path: Path) -> None:
    """``lm:9`` (or ``/v2/models/lm/versions/9/generate``) of a model with versions 1 and 2
    said "The model 'lm:9' does not exist", as if there were no model ``lm``."""
    store = open_store(default_sqlite_url(tmp_path / "home"))
    try:
        with store.transaction() as tx:
            project = tx.projects.create("p").id
        tokenizer = store.blobs.write([b'{"model": {}}'])
        _version(store, project, tokenizer), _version(store, project, tokenizer)
        cache: TargetCache = TtlCache(1.0)
        with pytest.raises(OpenAIError) as raised:
            _target(cache, store, project, 9)
        assert (raised.value.status, raised.value.code) == (404, "model_not_found")
        assert str(raised.value) == "The model 'lm' has no version 9 (its versions: 1, 2)"
        with pytest.raises(OpenAIError) as raised:
            asyncio.run(target_of(cache, store, project, "ghost", 1))
        assert str(raised.value) == "The model 'ghost' does not exist"
    finally:
        store.close()
