"""Blob storage throughput and memory on SQLite and PostgreSQL against a plain file copy.

Writes a random blob (256 MiB by default) into each database through the streaming blob store and
reads it back, each in a fresh subprocess so its peak resident memory can be measured above the
baseline taken right before the operation (the kernel's high-water mark is reset there). The
baseline is a file copy of the same bytes on the same disk (the temp dir, where the test
PostgreSQL also lives) in the same run; results are reported as ratios to it.

    bash tests/run-with-postgres.sh .venv/bin/python bench/storage.py [--size-mib 256]

(PostgreSQL comes from ``PTEFORGE_TEST_POSTGRES_URL`` or ``--postgres-url``; without either only
SQLite is measured.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from blake3 import blake3

from pteforge.children.limits import memory_figure, reset_memory_peak

MIB = 1024 * 1024


def _file_pieces(path: Path) -> Iterator[bytes]:
    with path.open("rb") as src:
        while piece := src.read(MIB):
            yield piece


def child(op: str, url: str, source: Path, sha256: str) -> dict[str, Any]:
    """Run one write or read in this process; returns seconds and memory figures."""
    from pteforge.storage import open_store

    store = open_store(url, migrate=False)
    if op == "write":
        store.blobs.collect_garbage(timedelta(0))  # start each repetition from empty
    if not reset_memory_peak():
        raise RuntimeError("cannot reset VmHWM through /proc/self/clear_refs")
    baseline = memory_figure("VmRSS") // 1024
    start = time.perf_counter()
    if op == "write":
        ref = store.blobs.write(_file_pieces(source))
        assert ref.sha256 == sha256, "written content does not hash as expected"
    else:
        for _ in store.blobs.open(sha256):
            pass
    seconds = time.perf_counter() - start
    peak = memory_figure("VmHWM") // 1024
    store.close()
    return {"seconds": seconds, "baseline_kib": baseline, "peak_kib": peak}


def _run_child(op: str, url: str, source: Path, sha256: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", op, url, str(source), sha256],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _make_source(path: Path, size_mib: int) -> str:
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for _ in range(size_mib):
            piece = os.urandom(MIB)
            digest.update(piece)
            out.write(piece)
    return digest.hexdigest()


def _copy_seconds(source: Path, workdir: Path) -> float:
    target = workdir / "copy.bin"
    start = time.perf_counter()
    shutil.copyfile(source, target)  # what `cp` does (copy_file_range/sendfile)
    with target.open("rb+") as f:
        os.fsync(f.fileno())
    seconds = time.perf_counter() - start
    target.unlink()
    return seconds


def _loop_copy_seconds(source: Path, workdir: Path) -> float:
    """A copy through user space in 1 MiB pieces, as the blob store sees the bytes."""
    target = workdir / "loop-copy.bin"
    start = time.perf_counter()
    with target.open("wb") as out:
        for piece in _file_pieces(source):
            out.write(piece)
        out.flush()
        os.fsync(out.fileno())
    seconds = time.perf_counter() - start
    target.unlink()
    return seconds


def _hash_seconds(source: Path, algorithm: Callable[[], Any]) -> float:
    """One pass of a hash over the bytes, read in 1 MiB pieces.

    A write makes one SHA-256 pass (the content's address) and one BLAKE3 pass (each chunk's
    digest); a read makes one BLAKE3 pass.
    """
    digest = algorithm()
    start = time.perf_counter()
    for piece in _file_pieces(source):
        digest.update(piece)
    return time.perf_counter() - start


def _fresh_postgres_db(base_url: str) -> str:
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"bench_{uuid.uuid4().hex[:12]}"
    admin = make_url(base_url).set(drivername="postgresql", database="postgres")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return make_url(base_url).set(database=name).render_as_string(hide_password=False)


def _databases(workdir: Path, postgres_url: str | None) -> dict[str, str]:
    from pteforge.storage import default_sqlite_url, open_store

    urls = {"sqlite": default_sqlite_url(workdir / "home")}
    if postgres_url:
        urls["postgresql"] = _fresh_postgres_db(postgres_url)
    for url in urls.values():
        open_store(url).close()  # migrate once, outside the measurements
    return urls


def measure(size_mib: int, repeat: int, postgres_url: str | None, workdir: Path) -> list[dict]:
    source = workdir / "source.bin"
    sha256 = _make_source(source, size_mib)
    rows: list[dict[str, Any]] = []
    copy_s = statistics.median(_copy_seconds(source, workdir) for _ in range(repeat))
    rows.append({"case": "file copy (baseline)", "seconds": copy_s, "ratio": 1.0})
    loop_s = statistics.median(_loop_copy_seconds(source, workdir) for _ in range(repeat))
    rows.append({"case": "file copy, 1 MiB read/write loop", "seconds": loop_s,
                 "ratio": copy_s / loop_s})  # fmt: skip
    for name, algorithm in (("sha256", hashlib.sha256), ("blake3", blake3)):
        hash_s = statistics.median(_hash_seconds(source, algorithm) for _ in range(repeat))
        rows.append({"case": f"{name} of the bytes, one pass", "seconds": hash_s,
                     "ratio": copy_s / hash_s})  # fmt: skip
    for db, url in _databases(workdir, postgres_url).items():
        for op in ("write", "read"):
            # writes run first and the last one leaves the blob for the reads
            runs = [_run_child(op, url, source, sha256) for _ in range(repeat)]
            best = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
            rows.append(
                {
                    "case": f"{db} {op}",
                    "db": db,
                    "seconds": best["seconds"],
                    "ratio": copy_s / best["seconds"],
                    "peak_above_baseline_mib": max(r["peak_kib"] - r["baseline_kib"] for r in runs)
                    / 1024,
                }
            )
    return rows


def _table(rows: list[dict[str, Any]], size_mib: int) -> str:
    lines = [
        f"| {size_mib} MiB blob | seconds | MiB/s | throughput / file copy "
        "| peak RSS above baseline |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        peak = r.get("peak_above_baseline_mib")
        lines.append(
            f"| {r['case']} | {r['seconds']:.2f} | {size_mib / r['seconds']:.0f} "
            f"| {r['ratio']:.2f} | {'-' if peak is None else f'{peak:.1f} MiB'} |"
        )
    return "\n".join(lines)


def main() -> None:
    from pteforge.quiet import quiet_third_party

    quiet_third_party()
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], Path(sys.argv[4]), sys.argv[5])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3, help="median of this many runs")
    parser.add_argument("--postgres-url", default=os.environ.get("PTEFORGE_TEST_POSTGRES_URL"))
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pteforge-bench-") as tmp:
        rows = measure(args.size_mib, args.repeat, args.postgres_url, Path(tmp))
    print(_table(rows, args.size_mib))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
