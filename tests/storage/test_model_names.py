"""Model names: versions counted per model, never reused, project-scoped, safe under
concurrent creates, and artifacts that a version serves kept."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from pteforge.storage import ConflictError, NotFoundError, SqlStore
from pteforge.storage.domain import BlobRef
from tests.storage.conftest import ManualClock, add_version, new_artifact, new_project


def test_versions_count_up_and_are_never_reused(store: SqlStore) -> None:
    alpha = new_project(store, "alpha")
    first, second = new_artifact(store, alpha, "a"), new_artifact(store, alpha, "b")
    assert [add_version(store, alpha, "m", first), add_version(store, alpha, "m", second)] == [1, 2]
    with store.transaction() as tx:
        assert tx.models.artifact_id(alpha, "m") == second
        assert tx.models.artifact_id(alpha, "m", 1) == first
        assert tx.models.delete_version(alpha, "m", 2)
        assert not tx.models.delete_version(alpha, "m", 2)
        assert tx.models.artifact_id(alpha, "m") == first
    assert add_version(store, alpha, "m", second) == 3
    with store.transaction() as tx:
        model = tx.models.get(alpha, "m")
        assert model is not None and model.latest_version == 3
        assert model.project_name == "alpha"
        assert [v.version for v in tx.models.versions(alpha, "m")] == [1, 3]
        tx.models.delete_version(alpha, "m", 1)
        tx.models.delete_version(alpha, "m", 3)
    with store.transaction() as tx:
        emptied = tx.models.get(alpha, "m")
        assert emptied is not None and emptied.latest_version is None
        assert tx.models.artifact_id(alpha, "m") is None
    assert add_version(store, alpha, "m", first) == 4


def test_models_are_project_scoped(store: SqlStore) -> None:
    alpha, beta = new_project(store, "alpha"), new_project(store, "beta")
    art = new_artifact(store, alpha, "a")
    add_version(store, alpha, "m", art)
    with pytest.raises(NotFoundError), store.transaction() as tx:
        tx.models.add_version(beta, "m", art)  # another project's artifact
    with store.transaction() as tx:
        assert tx.models.get(beta, "m") is None
        assert tx.models.list(beta) == []
        assert tx.models.artifact_id(beta, "m") is None
        assert not tx.models.delete_version(beta, "m", 1)
        assert [m.name for m in tx.models.list(alpha)] == ["m"]


def test_all_versions_lists_a_projects_versions_by_name_in_one_bounded_read(
    store: SqlStore,
) -> None:
    alpha, beta = new_project(store, "alpha"), new_project(store, "beta")
    art = new_artifact(store, alpha, "a")
    for name in ("zeta", "eta", "zeta", "eta", "eta"):
        add_version(store, alpha, name, art)
    add_version(store, beta, "eta", new_artifact(store, beta, "b"))
    with store.transaction() as tx:
        listed = [(name, v.version, v.artifact_id) for name, v in tx.models.all_versions(alpha, 10)]
        assert [(name, number) for name, number, _ in listed] == [
            ("eta", 1), ("eta", 2), ("eta", 3), ("zeta", 1), ("zeta", 2)
        ]  # fmt: skip
        assert {artifact for _, _, artifact in listed} == {art}
        assert len(tx.models.all_versions(alpha, 2)) == 2
        assert [name for name, _ in tx.models.all_versions(beta, 10)] == ["eta"]


def test_an_artifact_a_version_serves_is_not_deleted(store: SqlStore) -> None:
    alpha = new_project(store, "alpha")
    art = new_artifact(store, alpha, "a")
    add_version(store, alpha, "m", art)
    with pytest.raises(ConflictError, match="'m' version 1"), store.transaction() as tx:
        tx.artifacts.delete(alpha, art)
    with store.transaction() as tx:
        tx.models.delete_version(alpha, "m", 1)
        assert tx.artifacts.delete(alpha, art)


def test_concurrent_creates_never_share_a_number(store: SqlStore) -> None:
    alpha = new_project(store, "alpha")
    art = new_artifact(store, alpha, "a")
    with ThreadPoolExecutor(8) as threads:
        versions = list(threads.map(lambda _: add_version(store, alpha, "m", art), range(24)))
    assert sorted(versions) == list(range(1, 25))
    with store.transaction() as tx:
        assert len(tx.models.list(alpha)) == 1


def test_tokenizers_attach_to_versions_and_go_with_them(
    store: SqlStore, clock: ManualClock
) -> None:
    alpha, beta = new_project(store, "alpha"), new_project(store, "beta")
    add_version(store, alpha, "lm", new_artifact(store, alpha, "a"))
    tokenizer, config = store.blobs.write([b'{"model": {}}']), store.blobs.write([b"{}"])
    with pytest.raises(NotFoundError), store.transaction() as tx:
        tx.models.set_tokenizer(beta, "lm", 1, tokenizer, None)  # another project's model
    with store.transaction() as tx:
        assert tx.models.tokenizer(alpha, "lm", 1) is None
        tx.models.set_tokenizer(alpha, "lm", 1, tokenizer, config)
    with store.transaction() as tx:
        attached = tx.models.tokenizer(alpha, "lm", 1)
        assert attached is not None and (attached.tokenizer, attached.config) == (tokenizer, config)
        assert tx.models.tokenizer(beta, "lm", 1) is None
        tx.models.set_tokenizer(alpha, "lm", 1, tokenizer, None)  # replaced
    with store.transaction() as tx:
        replaced = tx.models.tokenizer(alpha, "lm", 1)
        assert replaced is not None and replaced.config is None
    clock.advance(timedelta(hours=1))
    store.blobs.collect_garbage(timedelta(0))
    assert store.blobs.exists(tokenizer.sha256) and not store.blobs.exists(config.sha256)
    with store.transaction() as tx:
        tx.models.delete_version(alpha, "lm", 1)
    add_version(store, alpha, "lm", new_artifact(store, alpha, "b"))
    with store.transaction() as tx:
        assert tx.models.tokenizer(alpha, "lm", 2) is None
    clock.advance(timedelta(hours=1))
    store.blobs.collect_garbage(timedelta(0))
    assert not store.blobs.exists(tokenizer.sha256)  # its version's row went with the version


def test_served_reads_a_version_its_content_and_tokenizer_in_one_go(store: SqlStore) -> None:
    alpha, beta = new_project(store, "alpha"), new_project(store, "beta")
    first, second = new_artifact(store, alpha, "a"), new_artifact(store, alpha, "b")
    assert [add_version(store, alpha, "lm", first), add_version(store, alpha, "lm", second)] == [
        1,
        2,
    ]
    tokenizer, config = store.blobs.write([b'{"model": {}}']), store.blobs.write([b"{}"])
    with store.transaction() as tx:
        tx.models.set_tokenizer(alpha, "lm", 1, tokenizer, config)
        programs = {a: tx.artifacts.get(alpha, a) for a in (first, second)}
    with store.transaction(read_only=True) as tx:
        latest, pinned = tx.models.served(alpha, "lm"), tx.models.served(alpha, "lm", 1)
        missing = [
            tx.models.served(alpha, "other"),
            tx.models.served(alpha, "lm", 3),
            tx.models.served(beta, "lm"),  # another project's model
            tx.models.served(beta, "lm", 1),
        ]
    assert missing == [None] * 4
    assert latest is not None and pinned is not None
    assert (latest.version, latest.tokenizer) == (2, None)  # no tokenizer on version 2
    assert pinned.version == 1 and pinned.tokenizer is not None
    assert (pinned.tokenizer.tokenizer, pinned.tokenizer.config) == (tokenizer, config)
    for served, artifact_id in ((latest, second), (pinned, first)):
        program = programs[artifact_id]
        assert program is not None
        assert served.program == BlobRef(program.sha256, program.size_bytes)


@pytest.mark.parametrize("version", [2**31, 2**70])
def test_a_number_no_version_can_have_names_none(store: SqlStore, version: int) -> None:
    """SQLite refused to bind an integer past 64 bits (``OverflowError``: a 500 on every
    route that takes a version); a number past the column's range names no version."""
    alpha = new_project(store, "alpha")
    add_version(store, alpha, "m", new_artifact(store, alpha, "a"))
    blob = store.blobs.write([b"{}"])
    with store.transaction() as tx:
        assert tx.models.artifact_id(alpha, "m", version) is None
        assert tx.models.served(alpha, "m", version) is None
        assert tx.models.tokenizer(alpha, "m", version) is None
        assert not tx.models.delete_version(alpha, "m", version)
        with pytest.raises(NotFoundError):
            tx.models.set_tokenizer(alpha, "m", version, blob, None)


def test_what_a_project_stores_counts_every_kind_of_content(store: SqlStore) -> None:
    """The storage quota's figure: programs, artifacts with their bundles, and tokenizers
    with their configs, each counted in full for each project that holds it."""
    alpha, beta = new_project(store, "alpha"), new_project(store, "beta")
    program, pte, bundle = (store.blobs.write([os.urandom(n)]) for n in (1000, 200, 30))
    tokenizer, config = store.blobs.write([b'{"model": {}}']), store.blobs.write([b"{}"])
    with store.transaction() as tx:
        assert tx.projects.stored_bytes(alpha) == 0
        program_id = tx.programs.create(alpha, "p", program, []).id
        artifact = tx.artifacts.create(alpha, program_id, pte, {}, "h", {}, [], bundle)
        tx.models.add_version(alpha, "lm", artifact.id)
        tx.models.set_tokenizer(alpha, "lm", 1, tokenizer, config)
        tx.programs.create(beta, "same content", program, [])
    with store.transaction(read_only=True) as tx:
        assert tx.projects.stored_bytes(alpha) == 1000 + 200 + 30 + tokenizer.size + 2
        assert tx.projects.stored_bytes(beta) == 1000
