"""Artifact use-cases: lookup, and accepting a `.pte` built elsewhere after verifying it."""

from __future__ import annotations

from pathlib import Path

from pteforge.contracts.json_types import JsonObject
from pteforge.server.artifacts.schemas import GENERATION_KEY
from pteforge.server.common.blob_files import check_quota, store_project_files
from pteforge.server.common.owned_rows import OwnedRows
from pteforge.server.common.services import Services
from pteforge.server.errors import ConflictError, InvalidUploadError
from pteforge.server.http.uploads import MultipartUpload
from pteforge.storage.domain import Artifact, BlobRef

PTE_PART = "pte"
UPLOADED_PLAN_HASH = "uploaded"


# Deleting an artifact deletes its content too, unless another row references it.
ARTIFACTS: OwnedRows[Artifact] = OwnedRows("artifact", lambda tx: tx.artifacts)


def bundle_of(services: Services, artifact: Artifact) -> BlobRef:
    """The stored BundledProgram of ``artifact``; 409 if it has none."""
    ref = (
        None
        if artifact.bundle_sha256 is None
        else services.store.blobs.stat(artifact.bundle_sha256)
    )
    if ref is None:
        why = "an uploaded .pte" if artifact.program_id is None else "compiled without one"
        raise ConflictError(
            f"artifact {artifact.id!r} has no test suite ({why}): no numerics-check inputs "
            "and expected outputs to bundle"
        )
    return ref


def _pte_part(upload: MultipartUpload) -> Path:
    parts = [p for p in upload.files if p.field_name == PTE_PART]
    if len(parts) != 1 or len(upload.files) != 1:
        raise InvalidUploadError("send exactly one file part named 'pte' holding the .pte")
    return parts[0].path


def create_uploaded_artifact(
    services: Services, project_id: str, upload: MultipartUpload
) -> Artifact:
    """Verify the `.pte` by loading it in a disposable process, then store it (with the
    runner metadata of a language model, read there too)."""
    from pteforge.server.sandbox import validate_pte_isolated

    path = _pte_part(upload)
    described = validate_pte_isolated(
        path, None, services.process_limits, isolation=services.isolation
    )
    report: JsonObject = {"source": "upload"}
    if described.generation is not None:
        report[GENERATION_KEY] = described.generation.model_dump(mode="json")
    (blob,) = store_project_files(services.store, services.settings, project_id, [path])
    with services.store.transaction() as tx:
        check_quota(tx, services.settings, project_id, blob.size)
        return tx.artifacts.create(
            project_id, None, blob, {}, UPLOADED_PLAN_HASH, report, described.methods
        )
