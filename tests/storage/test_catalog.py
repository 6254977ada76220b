"""Projects, tokens, programs and artifacts: tenant isolation and content references."""

from __future__ import annotations

import os

import pytest

from pteforge.storage import (
    BlobRef,
    ConflictError,
    MethodSignature,
    NotFoundError,
    SqlStore,
    TensorSpec,
)
from pteforge.storage.models import TokenRow

METHODS = (
    MethodSignature(
        "forward",
        inputs=(TensorSpec("x", "float32", (-1, 4)),),
        outputs=(TensorSpec("y", "float32", (-1, 2)),),
    ),
)


def _projects(store: SqlStore) -> tuple[str, str]:
    with store.transaction() as tx:
        return tx.projects.create("alpha").id, tx.projects.create("beta").id


def test_duplicate_project_name_conflicts_and_leaves_the_transaction_usable(
    store: SqlStore,
) -> None:
    with store.transaction() as tx:
        tx.projects.create("alpha")
        with pytest.raises(ConflictError):
            tx.projects.create("alpha")
        assert tx.projects.get_or_create("alpha").name == "alpha"
        tx.projects.create("gamma")
    with store.transaction() as tx:
        assert tx.projects.get_by_name("gamma") is not None


def test_rollback_on_error_commits_nothing(store: SqlStore) -> None:
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.projects.create("alpha")
        raise RuntimeError("caller failed")
    with store.transaction() as tx:
        assert tx.projects.get_by_name("alpha") is None


def test_tokens_are_stored_hashed_resolved_and_revoked(store: SqlStore) -> None:
    alpha, beta = _projects(store)
    with store.transaction() as tx:
        issued = tx.tokens.create(alpha, "ci")
    with store.engine.connect() as conn:
        stored = conn.execute(TokenRow.__table__.select()).one()
    assert issued.plaintext not in [str(v) for v in stored]
    with store.transaction() as tx:
        resolved = tx.tokens.resolve(issued.plaintext)
        assert resolved is not None and resolved[1].id == alpha
        assert tx.tokens.resolve(issued.plaintext + "x") is None
        assert not tx.tokens.revoke(beta, issued.token.id)  # another project's token
        assert tx.tokens.revoke(alpha, issued.token.id)
    with store.transaction() as tx:
        assert tx.tokens.resolve(issued.plaintext) is None
        assert tx.tokens.list(alpha)[0].revoked_at is not None


def test_another_projects_ids_look_missing(store: SqlStore) -> None:
    alpha, beta = _projects(store)
    blob = store.blobs.write([b"program"])
    with store.transaction() as tx:
        program = tx.programs.create(alpha, "m", blob, METHODS)
        artifact = tx.artifacts.create(alpha, program.id, blob, {"all": {}}, "h", {}, METHODS)
        job = tx.jobs.enqueue(alpha, "compile", {"program_id": program.id})
    with store.transaction() as tx:
        assert tx.programs.get(alpha, program.id) == program
        assert program.methods == METHODS
        assert tx.programs.get(beta, program.id) is None
        assert tx.programs.get(beta, "prog_missing") is None
        assert tx.artifacts.get(beta, artifact.id) is None
        assert tx.jobs.get(beta, job.id) is None
        assert tx.jobs.cancel(beta, job.id) is None
        assert not tx.programs.delete(beta, program.id)
        assert not tx.artifacts.delete(beta, artifact.id)
        assert tx.programs.list(beta) == [] and tx.artifacts.list(beta) == []
        assert tx.artifacts.get_any(artifact.id) == artifact


def test_same_program_and_plan_is_found_not_duplicated(store: SqlStore) -> None:
    alpha, _ = _projects(store)
    blob = store.blobs.write([b"program"])
    pte = store.blobs.write([b"pte"])
    with store.transaction() as tx:
        program = tx.programs.create(alpha, "m", blob, METHODS)
        first = tx.artifacts.create(alpha, program.id, pte, {"all": {}}, "h", {"n": 1}, METHODS)
    with store.transaction() as tx:
        assert tx.artifacts.find_compiled(program.id, "h") == first
        assert tx.artifacts.find_compiled(program.id, "other") is None
        with pytest.raises(ConflictError):
            tx.artifacts.create(alpha, program.id, pte, {}, "h", {}, METHODS)
        uploaded = [tx.artifacts.create(alpha, None, pte, {}, "h", {}, METHODS) for _ in "ab"]
        assert uploaded[0].id != uploaded[1].id


def test_rows_need_existing_content_of_the_stated_size(store: SqlStore) -> None:
    alpha, _ = _projects(store)
    blob = store.blobs.write([b"program"])
    with store.transaction() as tx:
        with pytest.raises(NotFoundError):
            tx.programs.create(alpha, "m", BlobRef("f" * 64, 7), METHODS)
        with pytest.raises(Exception, match="has 7 bytes"):
            tx.programs.create(alpha, "m", BlobRef(blob.sha256, 8), METHODS)


def test_deleting_keeps_content_referenced_elsewhere(store: SqlStore) -> None:
    alpha, beta = _projects(store)
    shared = store.blobs.write([os.urandom(10000)])
    own = store.blobs.write([b"only the artifact"])
    with store.transaction() as tx:
        program = tx.programs.create(alpha, "m", shared, METHODS)
        copy = tx.programs.create(beta, "m", shared, METHODS)
        artifact = tx.artifacts.create(alpha, program.id, shared, {}, "h1", {}, METHODS)
        other = tx.artifacts.create(alpha, program.id, own, {}, "h2", {}, METHODS)
    with store.transaction() as tx:
        assert tx.programs.delete(alpha, program.id)
        assert tx.artifacts.get(alpha, artifact.id).program_id is None  # type: ignore[union-attr]
    assert store.blobs.exists(shared.sha256)
    with store.transaction() as tx:
        assert tx.artifacts.delete(alpha, artifact.id)
    assert store.blobs.exists(shared.sha256)  # beta's program still uses it
    with store.transaction() as tx:
        assert tx.programs.delete(beta, copy.id)
        assert tx.artifacts.delete(alpha, other.id)
    assert not store.blobs.exists(shared.sha256)
    assert not store.blobs.exists(own.sha256)


def test_bad_method_specs_are_named() -> None:
    with pytest.raises(ValueError, match="shape"):
        bad = {"name": "x", "dtype": "f", "shape": "a"}
        MethodSignature.from_json({"name": "f", "inputs": [bad], "outputs": []})
    spec = METHODS[0]
    assert MethodSignature.from_json(spec.to_json()) == spec


def test_an_artifacts_ptd_is_counted_kept_while_shared_and_released(store: SqlStore) -> None:
    """The ``.ptd`` holding a ``.pte``'s constants (program-data separation) is content like
    the ``.pte``: counted in the project's usage, kept while another artifact shares it (two
    LoRA adapters over one foundation), released with the last artifact."""
    alpha, _ = _projects(store)
    pte_a = store.blobs.write([b"a program without its weights"])
    pte_b = store.blobs.write([b"another program without weights"])
    ptd = store.blobs.write([os.urandom(3000)])
    with store.transaction() as tx:
        before = tx.projects.stored_bytes(alpha)
        first = tx.artifacts.create(alpha, None, pte_a, {}, "u", {}, METHODS, data=ptd)
        second = tx.artifacts.create(alpha, None, pte_b, {}, "u", {}, METHODS, data=ptd)
        plain = tx.artifacts.create(alpha, None, pte_b, {}, "u", {}, METHODS)
        used = tx.projects.stored_bytes(alpha) - before
    assert used == pte_a.size + 2 * pte_b.size + 2 * ptd.size
    with store.transaction() as tx:
        assert tx.artifacts.get(alpha, first.id).data == ptd  # type: ignore[union-attr]
        assert tx.artifacts.get(alpha, plain.id).data is None  # type: ignore[union-attr]
        assert tx.artifacts.delete(alpha, first.id)
    assert store.blobs.exists(ptd.sha256)  # the second artifact still uses it
    with store.transaction() as tx:
        assert tx.artifacts.delete(alpha, second.id)
    assert not store.blobs.exists(ptd.sha256)
    assert store.blobs.exists(pte_b.sha256)  # the plain artifact's


def test_an_artifacts_ptd_must_exist_with_its_stated_size(store: SqlStore) -> None:
    alpha, _ = _projects(store)
    pte = store.blobs.write([b"pte"])
    with pytest.raises(NotFoundError), store.transaction() as tx:
        tx.artifacts.create(alpha, None, pte, {}, "u", {}, METHODS, data=BlobRef("0" * 64, 3))
