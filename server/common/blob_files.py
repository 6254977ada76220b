"""Moving files on disk into the content-addressed blob store, chunk by chunk, for a project
within its storage quota (``PTEFORGE_PROJECT_STORAGE_BYTES``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from pteforge.contracts.errors import ErrorCode
from pteforge.server.errors import ServiceError
from pteforge.server.settings import Settings
from pteforge.storage.blobs import BlobStore
from pteforge.storage.domain import BlobRef
from pteforge.storage.store import Store, Transaction


class StorageQuotaError(ServiceError, code=ErrorCode.INSUFFICIENT_STORAGE):
    """Storing the content would take the project past its storage quota (507, as WebDAV
    answers a quota; a failed compile job's code)."""


def file_chunks(path: Path, size: int) -> Iterator[bytes]:
    """The file's bytes in ``size``-byte chunks."""
    with path.open("rb") as f:
        while chunk := f.read(size):
            yield chunk


def store_file(blobs: BlobStore, path: Path) -> BlobRef:
    """Stream ``path`` into ``blobs``; returns its sha256 and size."""
    return blobs.write(file_chunks(path, blobs.chunk_size))


def store_project_files(
    store: Store, settings: Settings, project_id: str, paths: Sequence[Path]
) -> list[BlobRef]:
    """Stream ``paths`` into the store for the project's rows; first, ``StorageQuotaError``
    if that would take what the project stores past ``settings.project_storage_bytes``
    (None: no quota). That check is not a lock: uploads that run together may each pass it,
    so the transaction that adds their rows checks again (:func:`check_quota`)."""
    if settings.project_storage_bytes is not None:
        adding = sum(path.stat().st_size for path in paths)
        with store.transaction(read_only=True) as tx:
            check_quota(tx, settings, project_id, adding, lock=False)
    return [store_file(store.blobs, path) for path in paths]


def check_quota(
    tx: Transaction, settings: Settings, project_id: str, adding: int, lock: bool = True
) -> None:
    """``StorageQuotaError`` if ``adding`` more bytes would take the project past its
    storage quota. ``lock`` (call it in the transaction that adds the rows, before adding
    them): the project's row stays locked until ``tx`` ends, so concurrent uploads and
    compile jobs take turns and never pass the quota together (the content of one refused
    here is left unreferenced, for the garbage collector)."""
    quota = settings.project_storage_bytes
    if quota is None:
        return
    stored = tx.projects.stored_bytes(project_id, lock=lock)
    if stored + adding > quota:
        raise StorageQuotaError(
            f"this project stores {_mib(stored)}; {_mib(adding)} more would pass its "
            f"storage quota of {_mib(quota)} (PTEFORGE_PROJECT_STORAGE_BYTES): nothing was "
            "stored; delete programs or artifacts it no longer needs"
        )


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.1f} MiB"
