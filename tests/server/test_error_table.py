"""The one error table: every exception class of the answered layers declares one code, and a
failed job and an HTTP answer carry the same code for it (issue 22)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pteforge.backends.errors import InvalidOptionsError, UnknownBackendError
from pteforge.backends.quantization import QuantizationError
from pteforge.contracts.errors import ErrorCode, code_of
from pteforge.manager import errors as manager
from pteforge.server import error_map
from pteforge.server.errors import HTTP_STATUS, ServiceError, install_error_handlers
from pteforge.server.jobs.lowering_child import _error as job_error
from pteforge.server.sandbox import UnsafeArchiveError, UploadRejectedError, UploadTooLargeError
from pteforge.storage import errors as storage
from pteforge.storage.sql.errors import translated


def _classes() -> list[type[Exception]]:
    """Every class reachable from the layer roots, ours only (not a test's subclass)."""
    seen: list[type[Exception]] = []
    todo = list(error_map.ROOTS)
    while todo:
        cls = todo.pop()
        if cls not in seen and cls.__module__.startswith("pteforge."):
            seen.append(cls)
            todo.extend(cls.__subclasses__())
    return sorted(seen, key=lambda c: f"{c.__module__}.{c.__qualname__}")


CLASSES = _classes()


def _instance(cls: type[Exception]) -> Exception:
    """An instance of ``cls`` without its own constructor (each takes different arguments)."""
    exc = cls.__new__(cls)
    Exception.__init__(exc, f"a {cls.__name__}")
    for name, value in {"message": f"a {cls.__name__}", "reason": "a_reason", "size": 9}.items():
        setattr(exc, name, value)
    return exc


def _answer(client: TestClient, exc: Exception) -> tuple[int, dict[str, str]]:
    """The status and ``error`` object ``exc`` is answered with when a route raises it."""
    client.app.state.raised[type(exc).__name__] = exc  # type: ignore[attr-defined]
    response = client.get(f"/v1/raise/{type(exc).__name__}")
    return response.status_code, response.json()["error"]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    app = FastAPI()
    install_error_handlers(app, error_map.answer, error_map.ROOTS)
    raised: dict[str, Exception] = {}

    @app.get("/v1/raise/{name}")
    def _raise(name: str) -> None:
        raise raised[name]

    app.state.raised = raised
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_the_walk_finds_every_layer() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {"UnknownMethodError", "QuantizationError", "LeaseLostError", "InvalidPteError"} <= names
    assert {"InvalidUploadError", "RangeNotSatisfiableError"} <= names


@pytest.mark.parametrize("root", error_map.ROOTS, ids=lambda c: c.__name__)
def test_each_root_declares_its_code(root: type[Exception]) -> None:
    assert isinstance(vars(root).get("code"), ErrorCode)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_each_class_has_one_code_with_a_status(cls: type[Exception]) -> None:
    declared = [vars(k)["code"] for k in cls.__mro__ if "code" in vars(k)]
    assert declared and all(isinstance(code, ErrorCode) for code in declared), declared
    assert code_of(_instance(cls)) is declared[0]
    assert declared[0] in HTTP_STATUS


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_jobs_and_http_agree(client: TestClient, cls: type[Exception]) -> None:
    exc = _instance(cls)
    job_code = job_error(exc, None).code
    status, error = _answer(client, exc)
    if job_code is ErrorCode.INTERNAL_ERROR:  # a bug: answered as one, never with its text
        assert (status, error["code"]) == (500, "internal_error")
    elif isinstance(exc, UploadRejectedError):  # over HTTP, the defence that fired
        assert job_code is ErrorCode.UPLOAD_REJECTED
        assert (status, error["code"]) == (exc.http_status, "a_reason")
    else:
        assert (status, error) == (HTTP_STATUS[job_code], {"code": job_code, "message": str(exc)})


PINNED: dict[type[Exception], tuple[int, str]] = {
    manager.UnknownMethodError: (422, "invalid_plan"),  # was compile_failed in a job
    manager.PlanError: (422, "invalid_plan"),
    manager.UnknownBackendIdError: (422, "unknown_backend"),
    manager.LoweringError: (422, "lowering_failed"),
    manager.ProgramInputError: (422, "invalid_program"),
    manager.ManagerError: (422, "compile_failed"),
    UnknownBackendError: (422, "unknown_backend"),
    InvalidOptionsError: (422, "invalid_options"),
    QuantizationError: (500, "internal_error"),
    storage.BlobIntegrityError: (500, "integrity_error"),
    storage.InvalidRangeError: (416, "range_not_satisfiable"),
    storage.BlobNotFoundError: (404, "not_found"),
    storage.ConflictError: (409, "conflict"),
    storage.LeaseLostError: (409, "conflict"),
    storage.StorageError: (500, "internal_error"),
    storage.StorageFullError: (507, "insufficient_storage"),
    UploadTooLargeError: (413, "a_reason"),
    UnsafeArchiveError: (422, "a_reason"),
    ServiceError: (400, "bad_request"),
}


@pytest.mark.parametrize("cls", PINNED, ids=lambda c: c.__name__)
def test_the_answers_stay_as_pinned(client: TestClient, cls: type[Exception]) -> None:
    status, error = _answer(client, _instance(cls))
    assert (status, error["code"]) == PINNED[cls]


def test_an_exception_of_no_layer_is_a_bug(client: TestClient) -> None:
    status, error = _answer(client, KeyError("x"))
    assert (status, error) == (
        500,
        {"code": "internal_error", "message": "internal error (KeyError)"},
    )
    assert job_error(KeyError("x"), None).code is ErrorCode.INTERNAL_ERROR


def test_a_full_disk_is_507_in_every_layer_and_in_jobs(client: TestClient, tmp_path: Path) -> None:
    """A write to a full disk (the upload spool, a blob, the runtime's cache: an OSError
    ENOSPC, however wrapped) and a full database answer 507 ``insufficient_storage`` and fail
    a job with that code, never a 500 bug. The database here is really full: SQLite refuses
    to grow past ``max_page_count``."""
    wrapped = RuntimeError("could not spool the upload")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'full.db'}")
    with pytest.raises(storage.StorageFullError) as full, engine.begin() as db, translated():
        db.execute(sa.text("PRAGMA max_page_count = 8"))
        db.execute(sa.text("CREATE TABLE t (b BLOB)"))
        db.execute(sa.text("INSERT INTO t VALUES (zeroblob(1000000))"))
    for exc in (OSError(errno.EDQUOT, "Disk quota exceeded"), wrapped, full.value):
        status, error = _answer(client, exc)
        assert (status, error["code"]) == (507, "insufficient_storage"), error
        assert "out of space" in error["message"] or "out of disk space" in error["message"]
        assert job_error(exc, None).code is ErrorCode.INSUFFICIENT_STORAGE
    assert _answer(client, OSError(errno.EACCES, "denied"))[0] == 500  # any other: a bug
