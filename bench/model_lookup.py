"""The generation routes' model lookup in process: the four-query path against the one query.

``/v1/completions`` and ``/v2/models/{model}/generate`` resolve the model they name on every
request (``server/generation/target.py``: the version, its artifact's ``.pte`` and its
tokenizer). Issue 21 found that lookup the largest fixed cost in the time to first token: a
read transaction of four ORM queries (``models.get`` for the latest version,
``models.artifact_id``, ``artifacts.get``, ``models.tokenizer``). It is now one query
(``models.served``). This calls both, rounds interleaved so a busy spell of the shared machine
hits both sides, on the same database (a SQLite file; also a fresh PostgreSQL database when
``PTEFORGE_TEST_POSTGRES_URL`` is set), for the latest version (``name``) and a pinned one
(``name:1``), each in its own read transaction as the routes run it.

Run: ``.venv/bin/python bench/model_lookup.py [--calls 3000] [--rounds 3]``
(with PostgreSQL: ``bash tests/run-with-postgres.sh .venv/bin/python bench/model_lookup.py``)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timing import latencies, pct
from pteforge.server.generation.target import resolve_version
from pteforge.storage import SqlStore, default_sqlite_url, open_store
from pteforge.storage.domain import BlobRef

MODEL = "bench-lm"
VERSIONS = 3


def four_queries(
    store: SqlStore, project_id: str, name: str, asked: int | None
) -> tuple[int, BlobRef, object]:
    """The lookup as it was before issue 21's change: four queries in one read transaction."""
    with store.transaction(read_only=True) as tx:
        version = asked
        if version is None:
            found = tx.models.get(project_id, name)
            version = None if found is None else found.latest_version
        assert version is not None
        artifact_id = tx.models.artifact_id(project_id, name, version)
        assert artifact_id is not None
        artifact = tx.artifacts.get(project_id, artifact_id)
        tokenizer = tx.models.tokenizer(project_id, name, version)
        assert artifact is not None and tokenizer is not None
        return version, BlobRef(artifact.sha256, artifact.size_bytes), tokenizer


def deploy(store: SqlStore) -> str:
    """A project with model ``MODEL`` of ``VERSIONS`` versions, each with a tokenizer."""
    with store.transaction() as tx:
        project_id = tx.projects.create("bench").id
    tokenizer, config = store.blobs.write([b'{"model": {}}']), store.blobs.write([b"{}"])
    for i in range(VERSIONS):
        blob = store.blobs.write([os.urandom(256) + bytes([i])])
        with store.transaction() as tx:
            artifact = tx.artifacts.create(project_id, None, blob, {}, "bench", {}, [])
            version = tx.models.add_version(project_id, MODEL, artifact.id).version
            tx.models.set_tokenizer(project_id, MODEL, version, tokenizer, config)
    return project_id


def sides(store: SqlStore, project_id: str) -> dict[str, Callable[[], object]]:
    """The calls compared, old path first for each target; both give the same answer."""
    calls: dict[str, Callable[[], object]] = {}
    for asked in (None, 1):
        model = MODEL if asked is None else f"{MODEL}:{asked}"
        old = four_queries(store, project_id, MODEL, asked)
        new = resolve_version(store, project_id, MODEL, asked)
        assert (new.version, new.program[0]) == (old[0], old[1].sha256), model
        calls[f"{model}, four queries"] = lambda a=asked: four_queries(store, project_id, MODEL, a)
        calls[f"{model}, resolve_version"] = lambda a=asked: resolve_version(
            store, project_id, MODEL, a
        )
    return calls


def measure(url: str, calls: int, rounds: int) -> dict[str, list[float]]:
    """Microseconds of each call of each side, ``rounds`` interleaved rounds."""
    store = open_store(url)
    try:
        project_id = deploy(store)
        compared = sides(store, project_id)
        samples: dict[str, list[float]] = {label: [] for label in compared}
        for _ in range(rounds):
            for label, call in compared.items():
                ms = latencies(call, calls // rounds, warmup=50)
                samples[label] += [m * 1e3 for m in ms]
        return samples
    finally:
        store.close()


def report(database: str, samples: dict[str, list[float]]) -> None:
    """One table: best, p50 and p90 in microseconds, and each new side's p50 against the old
    one's (the best is the call that had the CPU throughout, on a loaded machine)."""
    print(f"\n{database}\n| lookup | best us | p50 us | p90 us | p50 vs four queries |")
    print("|---|---|---|---|---|")
    base = 0.0
    for label, values in samples.items():
        p50 = pct(values, 50)
        base = p50 if label.endswith("four queries") else base
        print(
            f"| {label} | {min(values):.0f} | {p50:.0f} | {pct(values, 90):.0f} "
            f"| {p50 / base:.2f}x |"
        )


@contextlib.contextmanager
def databases(work: Path) -> Iterator[dict[str, str]]:
    """SQLite in ``work``, and a fresh PostgreSQL database when the test server's URL is set."""
    urls = {"SQLite": default_sqlite_url(work / "home")}
    if not os.environ.get("PTEFORGE_TEST_POSTGRES_URL"):
        yield urls
        return
    from tests.postgres import fresh_database

    with fresh_database("bench") as postgres:
        yield {**urls, "PostgreSQL": postgres}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="timed calls of each side")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.calls} calls each, {args.rounds} rounds; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="model-lookup-") as work, databases(Path(work)) as urls:
        for database, url in urls.items():
            report(database, measure(url, args.calls, args.rounds))
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
