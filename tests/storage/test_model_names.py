"""Model names: versions counted per model, never reused, project-scoped, safe under
concurrent creates, and artifacts that a version serves kept."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from pteforge.storage import ConflictError, NotFoundError, SqlStore, open_store
from pteforge.storage.domain import BlobRef
from tests.postgres import fresh_database, wait_for_a_row_lock
from tests.storage.conftest import ManualClock


def _artifact(store: SqlStore, project_id: str, source: str) -> str:
    blob = store.blobs.write([os.urandom(64)])
    with store.transaction() as tx:
        return tx.artifacts.create(project_id, None, blob, {}, source, {}, []).id


def _project(store: SqlStore, name: str) -> str:
    with store.transaction() as tx:
        return tx.projects.create(name).id


def _add(store: SqlStore, project_id: str, name: str, artifact_id: str) -> int:
    with store.transaction() as tx:
        return tx.models.add_version(project_id, name, artifact_id).version


def test_versions_count_up_and_are_never_reused(store: SqlStore) -> None:
    alpha = _project(store, "alpha")
    first, second = _artifact(store, alpha, "a"), _artifact(store, alpha, "b")
    assert [_add(store, alpha, "m", first), _add(store, alpha, "m", second)] == [1, 2]
    with store.transaction() as tx:
        assert tx.models.artifact_id(alpha, "m") == second
        assert tx.models.artifact_id(alpha, "m", 1) == first
        assert tx.models.delete_version(alpha, "m", 2)
        assert not tx.models.delete_version(alpha, "m", 2)
        assert tx.models.artifact_id(alpha, "m") == first
    assert _add(store, alpha, "m", second) == 3
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
    assert _add(store, alpha, "m", first) == 4


def test_models_are_project_scoped(store: SqlStore) -> None:
    alpha, beta = _project(store, "alpha"), _project(store, "beta")
    art = _artifact(store, alpha, "a")
    _add(store, alpha, "m", art)
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
    alpha, beta = _project(store, "alpha"), _project(store, "beta")
    art = _artifact(store, alpha, "a")
    for name in ("zeta", "eta", "zeta", "eta", "eta"):
        _add(store, alpha, name, art)
    _add(store, beta, "eta", _artifact(store, beta, "b"))
    with store.transaction() as tx:
        listed = [(name, v.version, v.artifact_id) for name, v in tx.models.all_versions(alpha, 10)]
        assert [(name, number) for name, number, _ in listed] == [
            ("eta", 1), ("eta", 2), ("eta", 3), ("zeta", 1), ("zeta", 2)
        ]  # fmt: skip
        assert {artifact for _, _, artifact in listed} == {art}
        assert len(tx.models.all_versions(alpha, 2)) == 2
        assert [name for name, _ in tx.models.all_versions(beta, 10)] == ["eta"]


def test_an_artifact_a_version_serves_is_not_deleted(store: SqlStore) -> None:
    alpha = _project(store, "alpha")
    art = _artifact(store, alpha, "a")
    _add(store, alpha, "m", art)
    with pytest.raises(ConflictError, match="'m' version 1"), store.transaction() as tx:
        tx.artifacts.delete(alpha, art)
    with store.transaction() as tx:
        tx.models.delete_version(alpha, "m", 1)
        assert tx.artifacts.delete(alpha, art)


def test_concurrent_creates_never_share_a_number(store: SqlStore) -> None:
    alpha = _project(store, "alpha")
    art = _artifact(store, alpha, "a")
    with ThreadPoolExecutor(8) as threads:
        versions = list(threads.map(lambda _: _add(store, alpha, "m", art), range(24)))
    assert sorted(versions) == list(range(1, 25))
    with store.transaction() as tx:
        assert len(tx.models.list(alpha)) == 1


def test_tokenizers_attach_to_versions_and_go_with_them(
    store: SqlStore, clock: ManualClock
) -> None:
    alpha, beta = _project(store, "alpha"), _project(store, "beta")
    _add(store, alpha, "lm", _artifact(store, alpha, "a"))
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
    _add(store, alpha, "lm", _artifact(store, alpha, "b"))
    with store.transaction() as tx:
        assert tx.models.tokenizer(alpha, "lm", 2) is None
    clock.advance(timedelta(hours=1))
    store.blobs.collect_garbage(timedelta(0))
    assert not store.blobs.exists(tokenizer.sha256)  # its version's row went with the version


def test_served_reads_a_version_its_content_and_tokenizer_in_one_go(store: SqlStore) -> None:
    alpha, beta = _project(store, "alpha"), _project(store, "beta")
    first, second = _artifact(store, alpha, "a"), _artifact(store, alpha, "b")
    assert [_add(store, alpha, "lm", first), _add(store, alpha, "lm", second)] == [1, 2]
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
    alpha = _project(store, "alpha")
    _add(store, alpha, "m", _artifact(store, alpha, "a"))
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
    alpha, beta = _project(store, "alpha"), _project(store, "beta")
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


@pytest.mark.postgres  # SQLite serialises every writing transaction already (BEGIN IMMEDIATE)
def test_counting_under_lock_makes_a_projects_writers_take_turns() -> None:
    """The quota is checked before an upload's bytes are written, then again under the
    project's row lock in the transaction adding its rows: 8 uploads that passed the first
    check together stored 4 MiB under a 3 MB quota. The lock leaves rows that reference the
    project (jobs, tokens) insertable meanwhile."""
    lock = "SELECT 1 FROM projects WHERE id = :id FOR {} NOWAIT"
    with fresh_database("t") as url:
        store = open_store(url)
        try:
            alpha = _project(store, "alpha")
            with store.transaction() as tx, store.engine.connect() as other:
                tx.projects.stored_bytes(alpha, lock=True)
                with pytest.raises(OperationalError, match="could not obtain lock"):
                    other.execute(text(lock.format("NO KEY UPDATE")), {"id": alpha})
                other.rollback()
                assert other.execute(text(lock.format("KEY SHARE")), {"id": alpha}).scalar()
                other.rollback()
            with store.engine.connect() as other:  # the transaction ended: the lock is free
                assert other.execute(text(lock.format("NO KEY UPDATE")), {"id": alpha}).scalar()
        finally:
            store.close()


def _profile(store: SqlStore, project_id: str, name: str, artifact_id: str) -> str:
    with store.transaction() as tx:
        return tx.jobs.enqueue(project_id, "profile", {}, artifact_id=artifact_id).id


@pytest.mark.postgres  # SQLite serialises every writing transaction already (BEGIN IMMEDIATE)
@pytest.mark.parametrize("refer", [_add, _profile], ids=["version", "profile-job"])
def test_a_row_added_while_its_artifact_is_deleted_is_404_or_keeps_it(
    refer: Callable[[SqlStore, str, str, str], object],
) -> None:
    """On PostgreSQL the insert of a version (or a profile job) whose artifact was being
    deleted failed its foreign key, a ConflictError quoting the constraint (a 409 naming table
    and constraint); a deletion while a version was being added failed the same way. Whichever
    comes first now wins, and the other gets the answer it gets when they do not overlap."""
    with fresh_database("t") as url:
        store = open_store(url)
        try:
            alpha = _project(store, "alpha")
            art = _artifact(store, alpha, "a")
            with ThreadPoolExecutor(1) as thread:
                with store.transaction() as tx:  # the deletion first: the row is 404
                    assert tx.artifacts.delete(alpha, art)
                    adding = thread.submit(refer, store, alpha, "m", art)
                    wait_for_a_row_lock(store.engine)
                with pytest.raises(NotFoundError, match=r"not found|no longer exists"):
                    adding.result()
                art = _artifact(store, alpha, "b")
                with store.transaction() as tx:  # the version first: the deletion is 409
                    tx.models.add_version(alpha, "m", art)
                    deleting = thread.submit(_delete, store, alpha, art)
                    wait_for_a_row_lock(store.engine)
                with pytest.raises(ConflictError, match="served by model 'm' version 1"):
                    deleting.result()
        finally:
            store.close()


def _delete(store: SqlStore, project_id: str, artifact_id: str) -> bool:
    with store.transaction() as tx:
        return tx.artifacts.delete(project_id, artifact_id)


def test_a_profile_of_an_artifact_deleted_while_it_ran_is_not_found(store: SqlStore) -> None:
    """The job's row named the artifact again as it succeeded: its foreign key failed, and
    the job failed as a worker error quoting the constraint."""
    alpha = _project(store, "alpha")
    art = _artifact(store, alpha, "a")
    job = _profile(store, alpha, "m", art)
    with store.transaction() as tx:
        assert tx.jobs.claim_next("w1", timedelta(seconds=30)) is not None
    assert _delete(store, alpha, art)
    with pytest.raises(NotFoundError, match="no longer exists"), store.transaction() as tx:
        tx.jobs.succeed(job, "w1", art, {})
    with pytest.raises(NotFoundError, match="no longer exists"):
        _profile(store, alpha, "m", art)


@pytest.mark.postgres  # SQLite serialises every writing transaction already (BEGIN IMMEDIATE)
def test_a_tokenizer_attached_while_its_version_is_deleted_is_404() -> None:
    """On PostgreSQL it failed its foreign key: a 409 quoting the constraint."""
    with fresh_database("t") as url:
        store = open_store(url)
        try:
            alpha = _project(store, "alpha")
            _add(store, alpha, "m", _artifact(store, alpha, "a"))
            blob = store.blobs.write([b"{}"])
            with ThreadPoolExecutor(1) as thread:
                with store.transaction() as tx:
                    assert tx.models.delete_version(alpha, "m", 1)
                    attaching = thread.submit(_attach, store, alpha, blob)
                    wait_for_a_row_lock(store.engine)
                with pytest.raises(NotFoundError, match="'m' has no version 1"):
                    attaching.result()
        finally:
            store.close()


def _attach(store: SqlStore, project_id: str, blob: BlobRef) -> object:
    with store.transaction() as tx:
        return tx.models.set_tokenizer(project_id, "m", 1, blob, None)
