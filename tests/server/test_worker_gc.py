"""Compile workers collect unreferenced content after its grace period, and keep the rest."""

from __future__ import annotations

import time
from pathlib import Path

from pteforge.server.jobs.worker import Worker
from pteforge.server.settings import Settings
from pteforge.server.store import open_service_store
from pteforge.storage.domain import MethodSpec, TensorSpec


def test_worker_removes_only_unreferenced_content(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, blob_gc_interval_seconds=3600, blob_gc_grace_seconds=0.05)
    store = open_service_store(settings)
    try:
        orphan = store.blobs.write([b"nobody references me"])
        kept = store.blobs.write([b"a program references me"])
        spec = MethodSpec("forward", (TensorSpec("x", "float32", (1,)),), ())
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
