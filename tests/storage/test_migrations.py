"""The schema comes from the migrations, and they agree with the ORM models."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from pteforge.storage import BlobRef, SqlStore, StorageError, default_sqlite_url, open_store
from pteforge.storage.engine import create_store_engine
from pteforge.storage.models import Base
from tests.storage.legacy import current_store, insert_old_job, schema_at


def test_migrations_match_models(store: SqlStore) -> None:
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_schema_is_built_only_by_migrations(database_url: str) -> None:
    engine = create_store_engine(database_url)
    assert "jobs" not in inspect(engine).get_table_names()
    engine.dispose()
    store = open_store(database_url)
    tables = set(inspect(store.engine).get_table_names())
    assert set(Base.metadata.tables) | {"alembic_version"} == tables
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0010"
    store.close()


def test_concurrent_starts_migrate_once(database_url: str) -> None:
    code = "import sys; from pteforge.storage import open_store; open_store(sys.argv[1]).close()"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, database_url], stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    store = open_store(database_url)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
    store.close()


def test_sqlite_is_a_wal_file_under_home(tmp_path: Path) -> None:
    url = default_sqlite_url(tmp_path / "home")
    store = open_store(url)
    assert (tmp_path / "home" / "pteforge.db").is_file()
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    store.close()


def test_unusable_urls_are_named() -> None:
    with pytest.raises(StorageError, match="unsupported database"):
        open_store("mysql://localhost/x")
    with pytest.raises(StorageError, match="file path"):
        open_store("sqlite://")


def test_content_written_before_0002_stays_readable(database_url: str) -> None:
    data = os.urandom(5000)
    chunks = [data[:4096], data[4096:]]
    with schema_at(database_url, "0001") as conn:
        conn.execute(
            text("INSERT INTO blob_uploads (id, started_at) VALUES ('upl_old', :now)"),
            {"now": datetime.now(UTC)},
        )
        for seq, chunk in enumerate(chunks):
            conn.execute(
                text("INSERT INTO blob_chunks VALUES ('upl_old', :seq, :sha, :data)"),
                {"seq": seq, "sha": hashlib.sha256(chunk).hexdigest(), "data": chunk},
            )
        conn.execute(
            text("INSERT INTO blobs VALUES (:sha, :size, 4096, 'upl_old', :now)"),
            {"sha": hashlib.sha256(data).hexdigest(), "size": len(data), "now": datetime.now(UTC)},
        )
    with current_store(database_url) as store:
        assert store.blobs.read_bytes(hashlib.sha256(data).hexdigest()) == data


def test_jobs_from_before_0003_start_their_event_log(database_url: str) -> None:
    now = datetime.now(UTC)
    with schema_at(database_url, "0002") as conn:
        insert_old_job(conn, now, status="succeeded", stage="store", attempts=1, version=7)
    with current_store(database_url) as store, store.transaction() as tx:
        (event,) = tx.jobs.events("prj_old", "job_old")
    assert (event.version, event.status.value, event.stage) == (7, "succeeded", "store")
    assert event.at == now


def test_artifacts_from_before_0010_have_no_ptd(database_url: str) -> None:
    """Rows written at 0009 read back with ``data`` None, and take a ``.ptd`` after."""
    now = datetime.now(UTC)
    sha = hashlib.sha256(b"old").hexdigest()
    with schema_at(database_url, "0009") as conn:
        conn.execute(
            text("INSERT INTO projects (id, name, created_at) VALUES ('prj_old', 'old', :now)"),
            {"now": now},
        )
        conn.execute(
            text("INSERT INTO blob_uploads (id, started_at) VALUES ('upl_old', :now)"),
            {"now": now},
        )
        conn.execute(
            text("INSERT INTO blobs VALUES (:sha, 3, 4096, 'upl_old', :now)"),
            {"sha": sha, "now": now},
        )
        conn.execute(
            text(
                "INSERT INTO artifacts (id, project_id, blob_sha256, size_bytes, methods, plan,"
                " plan_hash, report, created_at) VALUES ('art_old', 'prj_old', :sha, 3, '[]',"
                " '{}', 'uploaded', '{}', :now)"
            ),
            {"sha": sha, "now": now},
        )
        # a model version serves it: on SQLite, 0010 copies the artifacts table and drops
        # the old one, which failed on this reference ('FOREIGN KEY constraint failed')
        conn.execute(
            text("INSERT INTO models VALUES ('mdl_old', 'prj_old', :now, 'old-model', 2)"),
            {"now": now},
        )
        conn.execute(
            text("INSERT INTO model_versions VALUES ('mdl_old', 1, 'art_old', :now)"),
            {"now": now},
        )
    with current_store(database_url) as store:
        with store.engine.connect() as conn:
            served = conn.execute(text("SELECT artifact_id FROM model_versions")).scalars()
            assert list(served) == ["art_old"]
        with store.transaction() as tx:
            old = tx.artifacts.get("prj_old", "art_old")
            assert old is not None and old.data is None and old.sha256 == sha
            assert tx.projects.stored_bytes("prj_old") == 3
        ptd = store.blobs.write([b"weights"])
        with store.transaction() as tx:
            pte = BlobRef(sha, 3)
            new = tx.artifacts.create("prj_old", None, pte, {}, "u", {}, [], data=ptd)
        with store.transaction() as tx:
            assert tx.artifacts.get("prj_old", new.id).data == ptd  # type: ignore[union-attr]
            assert tx.projects.stored_bytes("prj_old") == 3 + 3 + ptd.size
