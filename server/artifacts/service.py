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
PTD_PART = "ptd"
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


def data_of(artifact: Artifact) -> BlobRef:
    """The artifact's `.ptd` (the constants its `.pte` keeps outside); 409 if it has none."""
    if artifact.data is None:
        raise ConflictError(
            f"artifact {artifact.id!r} has no .ptd: its .pte holds all its constants"
        )
    return artifact.data


def _parts(upload: MultipartUpload) -> tuple[Path, Path | None]:
    """The `.pte` part, and the optional `.ptd` part."""
    ptes = [p.path for p in upload.files if p.field_name == PTE_PART]
    ptds = [p.path for p in upload.files if p.field_name == PTD_PART]
    if len(ptes) != 1 or len(ptds) > 1 or len(upload.files) != len(ptes) + len(ptds):
        raise InvalidUploadError(
            "send exactly one file part named 'pte' holding the .pte, and at most one named "
            "'ptd' holding the .ptd its constants are in (program-data separation)"
        )
    return ptes[0], ptds[0] if ptds else None


def create_uploaded_artifact(
    services: Services, project_id: str, upload: MultipartUpload
) -> Artifact:
    """Verify the `.pte` (with its `.ptd`, if sent) by loading every method in a disposable
    process, then store them (with the runner metadata of a language model, read there
    too)."""
    from pteforge.server.sandbox import validate_pte_isolated

    path, ptd = _parts(upload)
    described = validate_pte_isolated(
        path, None, services.process_limits, isolation=services.isolation, data=ptd
    )
    report: JsonObject = {"source": "upload"}
    if described.generation is not None:
        report[GENERATION_KEY] = described.generation.model_dump(mode="json")
    files = [path] if ptd is None else [path, ptd]
    blob, *data = store_project_files(services.store, services.settings, project_id, files)
    with services.store.transaction() as tx:
        check_quota(tx, services.settings, project_id, blob.size + sum(d.size for d in data))
        return tx.artifacts.create(
            project_id,
            None,
            blob,
            {},
            UPLOADED_PLAN_HASH,
            report,
            described.methods,
            data=data[0] if data else None,
        )
