"""Stream a multipart request body to temporary files, enforcing a size limit.

Request bodies never sit in memory: each file part is written to its own file under the
uploads directory as it arrives, and the body is cut off (413) as soon as it passes the
configured limit, whatever ``Content-Length`` claimed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TypeVar

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from pteforge.server.common.services import Services
from pteforge.server.errors import InvalidRequestError, UnsupportedMediaTypeError
from pteforge.server.http.bodies import (
    capped_chunks,
    check_content_length,
    held_in_v1,
    refuse_content_encoding,
)

T = TypeVar("T")

_MAX_FIELD_BYTES = 64 * 1024
_MAX_PARTS = 64
# A part's Content-Disposition line holds its field name; python-multipart's 4 KiB default
# would refuse a long name as "Maximum header size exceeded" before the name rule can say why.
_MAX_PART_HEADER_BYTES = 16 * 1024
# Parts reach the disk in slices of about this size, parsed and written from a worker thread
# so the event loop never waits on the disk.
_WRITE_SLICE_BYTES = 1 << 20

FieldNameCheck = Callable[[str], object]
"""Vets a file part's field name as soon as its headers are read; raises to refuse it."""


@dataclass
class UploadedPart:
    """One file part of the body, already on disk."""

    field_name: str
    filename: str | None
    path: Path
    size_bytes: int = 0


@dataclass
class MultipartUpload:
    """A parsed multipart body: file parts on disk (in body order) and small text fields."""

    files: list[UploadedPart] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)

    def cleanup(self) -> None:
        """Delete the temporary files."""
        for part in self.files:
            with contextlib.suppress(FileNotFoundError):
                part.path.unlink()


class _PartWriter:
    """python-multipart callbacks writing file parts to disk and collecting text fields."""

    def __init__(
        self, upload: MultipartUpload, directory: Path, check_name: FieldNameCheck | None
    ) -> None:
        self.upload = upload
        self.directory = directory
        self.check_name = check_name
        self._headers: dict[bytes, bytes] = {}
        self._header_name = b""
        self._header_value = b""
        self._file: BinaryIO | None = None
        self._text = bytearray()
        self._name = ""
        self._parts = 0

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self.on_part_begin,
            "on_header_field": lambda d, s, e: self._add_name(d[s:e]),
            "on_header_value": lambda d, s, e: self._add_value(d[s:e]),
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
        }

    def _add_name(self, data: bytes) -> None:
        self._header_name += data

    def _add_value(self, data: bytes) -> None:
        self._header_value += data

    def on_part_begin(self) -> None:
        self._headers, self._text, self._file = {}, bytearray(), None
        self._parts += 1
        if self._parts > _MAX_PARTS:  # text fields too: each is held in memory
            raise InvalidRequestError(f"more than {_MAX_PARTS} parts")

    def on_header_end(self) -> None:
        self._headers[self._header_name.lower()] = self._header_value
        self._header_name, self._header_value = b"", b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        if b"name" not in options:
            raise InvalidRequestError("a multipart part has no Content-Disposition name")
        self._name = options[b"name"].decode("utf-8", "replace")
        if b"filename" not in options:
            return
        if self.check_name is not None:
            self.check_name(self._name)
        fd, path = tempfile.mkstemp(dir=self.directory, suffix=".upload")
        self._file = os.fdopen(fd, "wb")
        filename = options[b"filename"].decode("utf-8", "replace")
        self.upload.files.append(UploadedPart(self._name, filename, Path(path)))

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._file is not None:
            self._file.write(data[start:end])
            self.upload.files[-1].size_bytes += end - start
            return
        self._text += data[start:end]
        if len(self._text) > _MAX_FIELD_BYTES:
            raise InvalidRequestError(f"form field {self._name!r} exceeds {_MAX_FIELD_BYTES} bytes")

    def on_part_end(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        else:
            self.upload.fields[self._name] = self._text.decode("utf-8", "replace")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _boundary(request: Request) -> bytes:
    content_type, params = parse_options_header(request.headers.get("content-type"))
    if content_type != b"multipart/form-data":
        shown = content_type.decode("latin-1")[:100] or "none"
        raise UnsupportedMediaTypeError(
            f"expected a multipart/form-data body, got Content-Type {shown!r}"
        )
    if b"boundary" not in params:
        raise InvalidRequestError("the multipart/form-data Content-Type has no boundary")
    return params[b"boundary"]


async def receive_multipart(
    request: Request, directory: Path, limit: int, check_name: FieldNameCheck | None = None
) -> MultipartUpload:
    """Parse the request's multipart body into files under ``directory`` (413 over ``limit``).

    ``check_name`` vets each file part's field name before any of its bytes are written.
    Parsing and writing run in a worker thread, about 1 MiB at a time. The caller owns the
    returned upload and must ``cleanup()`` it.
    """
    check_content_length(request, limit)
    boundary = _boundary(request)
    refuse_content_encoding(request, "multipart uploads")
    await run_in_threadpool(directory.mkdir, parents=True, exist_ok=True)
    upload = MultipartUpload()
    writer = _PartWriter(upload, directory, check_name)
    parser = MultipartParser(
        boundary,
        writer.callbacks(),  # type: ignore[arg-type]
        max_header_size=_MAX_PART_HEADER_BYTES,
    )
    try:
        await _feed(request, parser, limit)
    except MultipartParseError as exc:
        writer.close()
        upload.cleanup()
        raise InvalidRequestError(f"malformed multipart body: {exc}") from exc
    except BaseException:
        writer.close()
        upload.cleanup()
        raise
    return upload


async def _feed(request: Request, parser: MultipartParser, limit: int) -> None:
    """Stream the body into ``parser`` off the event loop, cutting it off past ``limit``."""
    pending: list[bytes] = []
    pending_bytes = 0
    async for chunk in capped_chunks(request, limit):
        pending.append(chunk)
        pending_bytes += len(chunk)
        if pending_bytes >= _WRITE_SLICE_BYTES:
            await run_in_threadpool(parser.write, b"".join(pending))
            pending, pending_bytes = [], 0
    await run_in_threadpool(parser.write, b"".join(pending))
    await run_in_threadpool(parser.finalize)


@contextlib.contextmanager
def owned(upload: MultipartUpload) -> Iterator[MultipartUpload]:
    """Delete the upload's files when the block ends."""
    try:
        yield upload
    finally:
        upload.cleanup()


async def store_upload(
    request: Request,
    services: Services,
    project_id: str,
    store: Callable[..., T],
    *args: object,
    check_name: FieldNameCheck | None = None,
    cap: int | None = None,
) -> T:
    """Receive the request's multipart body under ``settings.uploads_dir`` (413 over
    ``settings.max_upload_bytes``, or over ``cap`` where that is lower), call
    ``store(services, project_id, *args, upload)`` in a worker thread and return its result;
    the upload's files are deleted when it returns or raises. Until then, while it is received
    and while it is checked and stored, it counts among the project's requests in flight (429
    past their number): it holds its connection and its files on disk all that time."""
    settings = services.settings
    limit = settings.max_upload_bytes if cap is None else min(settings.max_upload_bytes, cap)
    with held_in_v1(request, project_id):
        upload = await receive_multipart(request, settings.uploads_dir, limit, check_name)
        with owned(upload):
            return await run_in_threadpool(store, services, project_id, *args, upload)
