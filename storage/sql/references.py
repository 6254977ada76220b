"""Which rows reference stored content, and removing content nothing references any more."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Connection, delete, exists, or_, select
from sqlalchemy.orm import QueryableAttribute, Session

from pteforge.storage.models import (
    ArtifactRow,
    BlobChunkRow,
    BlobRow,
    BlobUploadRow,
    ModelTokenizerRow,
    ProgramRow,
)


def referenced(sha256: ColumnElement[str] | QueryableAttribute[str] | str) -> ColumnElement[bool]:
    """Whether a program, an artifact (its .pte, bundle or .ptd) or a model version's tokenizer
    references the content."""
    return or_(
        exists().where(ProgramRow.blob_sha256 == sha256),
        exists().where(ArtifactRow.blob_sha256 == sha256),
        exists().where(ArtifactRow.bundle_sha256 == sha256),
        exists().where(ArtifactRow.data_sha256 == sha256),
        exists().where(ModelTokenizerRow.tokenizer_sha256 == sha256),
        exists().where(ModelTokenizerRow.config_sha256 == sha256),
    )


def release_blob(conn: Session | Connection, sha256: str) -> bool:
    """Delete the content ``sha256`` if no row references it; True if deleted.

    Runs in the caller's transaction; the foreign keys from programs and artifacts to blobs make
    a concurrent new reference either wait for this transaction or fail cleanly.
    """
    if conn.execute(select(referenced(sha256))).scalar_one():
        return False
    upload_id = conn.execute(
        select(BlobRow.upload_id).where(BlobRow.sha256 == sha256)
    ).scalar_one_or_none()
    if upload_id is None:
        return False
    conn.execute(delete(BlobRow).where(BlobRow.sha256 == sha256))
    delete_upload(conn, upload_id)
    return True


def delete_upload(conn: Session | Connection, upload_id: str) -> None:
    """Delete an upload and its chunks."""
    conn.execute(delete(BlobChunkRow).where(BlobChunkRow.upload_id == upload_id))
    conn.execute(delete(BlobUploadRow).where(BlobUploadRow.id == upload_id))
