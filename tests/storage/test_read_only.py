"""Read-only transactions: on SQLite they take no write lock, so reads never queue behind
writers (the API's reads and token checks run this way)."""

from __future__ import annotations

from pteforge.storage import SqlStore


def test_a_read_only_transaction_reads_while_a_writer_holds_the_lock(store: SqlStore) -> None:
    with store.transaction() as setup:
        project = setup.projects.create("p")
    with store.transaction() as writer:  # holds SQLite's write lock until the block ends
        writer.projects.create("q")
        with store.transaction(read_only=True) as reader:
            assert reader.projects.get(project.id) == project  # no wait for the writer
            assert reader.projects.get_by_name("q") is None  # nor sight of its changes
    with store.transaction(read_only=True) as reader:
        assert reader.projects.get_by_name("q") is not None
