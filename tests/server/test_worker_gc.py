"""Compile workers collect unreferenced content after its grace period and finished jobs
after their retention, and keep the rest."""

from __future__ import annotations

import time
from pathlib import Path

from pteforge.server.jobs.worker import Worker
from pteforge.server.settings import Settings
from pteforge.server.startup.database import open_service_store
from pteforge.storage import Store
from pteforge.storage.domain import Job, MethodSignature, TensorSpec


def test_worker_removes_only_unreferenced_content(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, blob_gc_interval_seconds=3600, blob_gc_grace_seconds=0.05)
    store = open_service_store(settings)
    try:
        orphan = store.blobs.write([b"nobody references me"])
        kept = store.blobs.write([b"a program references me"])
        spec = MethodSignature("forward", (TensorSpec("x", "float32", (1,)),), ())
        with store.transaction() as tx:
            project = tx.projects.create("p")
            tx.programs.create(project.id, "m", kept, [spec])
        deadline = time.monotonic() + 5  # past the grace period on the store's clock
        while time.monotonic() < deadline and store.blobs.exists(orphan.sha256):
            worker = Worker(settings, "gc-test")
            worker._maybe_collect_garbage(store)
        assert not store.blobs.exists(orphan.sha256)
        assert store.blobs.exists(kept.sha256)
        assert b"".join(store.blobs.open(kept.sha256)) == b"a program references me"
    finally:
        store.close()


def test_worker_deletes_only_jobs_ended_past_retention(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, job_retention_seconds=0.05)
    store = open_service_store(settings)
    try:
        with store.transaction() as tx:
            project = tx.projects.create("p")
            ended = tx.jobs.enqueue(project.id, "compile", {})
            waiting = tx.jobs.enqueue(project.id, "compile", {})
            tx.jobs.cancel(project.id, ended.id)
        deadline = time.monotonic() + 5  # past the retention on the store's clock
        while time.monotonic() < deadline and _exists(store, ended):
            Worker(settings, "gc-test")._maybe_collect_garbage(store)
        assert not _exists(store, ended)
        assert _exists(store, waiting)
    finally:
        store.close()


def _exists(store: Store, job: Job) -> bool:
    with store.transaction() as tx:
        return tx.jobs.get(job.project_id, job.id) is not None
