"""Writers that overlap on PostgreSQL (SQLite serialises every writing transaction, BEGIN
IMMEDIATE): a project's quota counted under its row lock, and a version, profile job or
tokenizer added while what it names is deleted: whichever comes first wins, and the other
gets the answer it gets when they do not overlap, never a foreign key's 409."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from pteforge.storage import ConflictError, NotFoundError, SqlStore, open_store
from pteforge.storage.domain import BlobRef
from tests.postgres import fresh_database, wait_for_a_row_lock
from tests.storage.conftest import add_version, new_artifact, new_project

T = TypeVar("T")


@contextmanager
def _postgres_store() -> Iterator[SqlStore]:
    """A store on a fresh PostgreSQL database."""
    with fresh_database("t") as url:
        store = open_store(url)
        try:
            yield store
        finally:
            store.close()


def _while_held(store: SqlStore, hold: Callable[[Any], object], then: Callable[[], T]) -> T:
    """``then()``'s answer, run in another thread while a transaction that did ``hold``
    (which must succeed) is open: started, waited for until it waits on a row lock that
    transaction holds, then the transaction commits and ``then`` goes on."""
    with ThreadPoolExecutor(1) as thread:
        with store.transaction() as tx:
            assert hold(tx)
            later = thread.submit(then)
            wait_for_a_row_lock(store.engine)
        return later.result()


@pytest.mark.postgres  # SQLite serialises every writing transaction already (BEGIN IMMEDIATE)
def test_counting_under_lock_makes_a_projects_writers_take_turns() -> None:
    """The quota is checked before an upload's bytes are written, then again under the
    project's row lock in the transaction adding its rows: 8 uploads that passed the first
    check together stored 4 MiB under a 3 MB quota. The lock leaves rows that reference the
    project (jobs, tokens) insertable meanwhile."""
    lock = "SELECT 1 FROM projects WHERE id = :id FOR {} NOWAIT"
    with _postgres_store() as store:
        alpha = new_project(store, "alpha")
        with store.transaction() as tx, store.engine.connect() as other:
            tx.projects.stored_bytes(alpha, lock=True)
            with pytest.raises(OperationalError, match="could not obtain lock"):
                other.execute(text(lock.format("NO KEY UPDATE")), {"id": alpha})
            other.rollback()
            assert other.execute(text(lock.format("KEY SHARE")), {"id": alpha}).scalar()
            other.rollback()
        with store.engine.connect() as other:  # the transaction ended: the lock is free
            assert other.execute(text(lock.format("NO KEY UPDATE")), {"id": alpha}).scalar()


def _profile(store: SqlStore, project_id: str, name: str, artifact_id: str) -> str:
    with store.transaction() as tx:
        return tx.jobs.enqueue(project_id, "profile", {}, artifact_id=artifact_id).id


@pytest.mark.postgres  # SQLite serialises every writing transaction already (BEGIN IMMEDIATE)
@pytest.mark.parametrize("refer", [add_version, _profile], ids=["version", "profile-job"])
def test_a_row_added_while_its_artifact_is_deleted_is_404_or_keeps_it(
    refer: Callable[[SqlStore, str, str, str], object],
) -> None:
    """On PostgreSQL the insert of a version (or a profile job) whose artifact was being
    deleted failed its foreign key, a ConflictError quoting the constraint (a 409 naming table
    and constraint); a deletion while a version was being added failed the same way. Whichever
    comes first now wins, and the other gets the answer it gets when they do not overlap."""
    with _postgres_store() as store:
        alpha = new_project(store, "alpha")
        art = new_artifact(store, alpha, "a")
        with pytest.raises(NotFoundError, match=r"not found|no longer exists"):
            deleted = lambda tx: tx.artifacts.delete(alpha, art)  # noqa: E731
            _while_held(store, deleted, partial(refer, store, alpha, "m", art))  # first: 404
        art = new_artifact(store, alpha, "b")
        with pytest.raises(ConflictError, match="served by model 'm' version 1"):
            added = lambda tx: tx.models.add_version(alpha, "m", art)  # noqa: E731
            _while_held(store, added, partial(_delete, store, alpha, art))  # first: 409


def _delete(store: SqlStore, project_id: str, artifact_id: str) -> bool:
    with store.transaction() as tx:
        return tx.artifacts.delete(project_id, artifact_id)


def test_a_profile_of_an_artifact_deleted_while_it_ran_is_not_found(store: SqlStore) -> None:
    """The job's row named the artifact again as it succeeded: its foreign key failed, and
    the job failed as a worker error quoting the constraint."""
    alpha = new_project(store, "alpha")
    art = new_artifact(store, alpha, "a")
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
    with _postgres_store() as store:
        alpha = new_project(store, "alpha")
        add_version(store, alpha, "m", new_artifact(store, alpha, "a"))
        blob = store.blobs.write([b"{}"])
        with pytest.raises(NotFoundError, match="'m' has no version 1"):
            deleted = lambda tx: tx.models.delete_version(alpha, "m", 1)  # noqa: E731
            _while_held(store, deleted, partial(_attach, store, alpha, blob))


def _attach(store: SqlStore, project_id: str, blob: BlobRef) -> object:
    with store.transaction() as tx:
        return tx.models.set_tokenizer(project_id, "m", 1, blob, None)
