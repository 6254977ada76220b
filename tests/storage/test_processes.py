"""Real processes: concurrent job claiming, and a writer killed mid-write."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from pteforge.storage import BlobNotFoundError, JobStatus, SqlStore
from pteforge.storage.models import BlobChunkRow, BlobUploadRow
from tests.storage.conftest import ManualClock
from tests.storage.procs import content

REPO = Path(__file__).resolve().parents[2]
WORKERS = 4
JOBS = 60


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.storage.procs", *args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen[bytes]) -> None:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()


def test_each_job_runs_exactly_once_across_worker_processes(
    store: SqlStore, database_url: str, tmp_path: Path
) -> None:
    with store.transaction() as tx:
        project = tx.projects.create("p")
        ids = {tx.jobs.enqueue(project.id, "compile", {"i": i}).id for i in range(JOBS)}
    go = tmp_path / "go"
    logs = [tmp_path / f"runs-{n}.txt" for n in range(WORKERS)]
    procs = [_spawn("work", database_url, str(log), str(go)) for log in logs]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"READY"
    go.touch()
    for proc in procs:
        _finish(proc)
    runs = Counter(line for log in logs for line in log.read_text().split())
    assert set(runs) == ids
    assert set(runs.values()) == {1}
    with store.transaction() as tx:
        jobs = tx.jobs.list(project.id, limit=JOBS)
    assert {(j.status, j.attempts) for j in jobs} == {(JobStatus.SUCCEEDED, 1)}


def _count(store: SqlStore, table: type) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_writer_killed_mid_write_leaves_nothing_visible(
    store: SqlStore, database_url: str, clock: ManualClock
) -> None:
    size, seed = 2 * 1024 * 1024, 7
    data = content(size, seed)
    sha256 = hashlib.sha256(data).hexdigest()
    writer = _spawn("write", database_url, str(size), str(seed))
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == b"HALF", writer.stderr.read().decode()  # type: ignore[union-attr]
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    orphan_chunks = _count(store, BlobChunkRow)
    assert orphan_chunks > 0  # chunks were committed before the kill: a real mid-write
    assert not store.blobs.exists(sha256)
    with pytest.raises(BlobNotFoundError):
        store.blobs.open(sha256)

    ref = store.blobs.write([data])
    assert ref.sha256 == sha256
    assert store.blobs.read_bytes(sha256) == data
    assert _count(store, BlobUploadRow) == 2
    with store.transaction() as tx:
        tx.programs.create(tx.projects.create("p").id, "m", ref, [])
    clock.advance(timedelta(days=1))
    assert store.blobs.collect_garbage(older_than=timedelta(hours=1)) == 1
    assert _count(store, BlobUploadRow) == 1
    assert _count(store, BlobChunkRow) == -(-size // store.blobs.chunk_size)
    assert store.blobs.read_bytes(sha256) == data
