"""Translating SQLAlchemy errors into the storage layer's exceptions."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from pteforge.storage.errors import ConflictError, NotFoundError, StorageError, StorageFullError


def translate(error: sa_exc.SQLAlchemyError) -> StorageError:
    """The storage exception for a SQLAlchemy error."""
    if isinstance(error, sa_exc.IntegrityError):
        return ConflictError(f"conflicts with existing data: {error.orig}")
    if isinstance(error, sa_exc.DataError) and _nul(error.orig):
        return NotFoundError("nothing is named with a NUL character")
    if isinstance(error, sa_exc.DBAPIError) and _full(error.orig):
        return StorageFullError(f"the database is out of space: nothing was stored ({error.orig})")
    if isinstance(error, sa_exc.DBAPIError):
        return StorageError(f"database error: {error.orig}")
    return StorageError(f"database error: {error}")


def _nul(orig: BaseException | None) -> bool:
    """psycopg's refusal of a NUL character in a text parameter: PostgreSQL text cannot hold
    one, so a key with one (an id in a URL, ``a%00b``) names no row, as on SQLite."""
    return "NUL (0x00)" in str(orig)


def _full(orig: BaseException | None) -> bool:
    """SQLite's SQLITE_FULL, or PostgreSQL's ``disk_full`` (SQLSTATE 53100)."""
    if getattr(orig, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return True
    return str(getattr(orig, "sqlstate", "") or "") == "53100"


@contextmanager
def translated() -> Iterator[None]:
    """Re-raise SQLAlchemy errors from the block as storage errors."""
    try:
        yield
    except sa_exc.SQLAlchemyError as error:
        raise translate(error) from error


def insert_row(session: Session, row: object, what: str) -> None:
    """Insert ``row`` in a savepoint so a ConflictError leaves the transaction usable."""
    try:
        with session.begin_nested():
            session.add(row)
    except sa_exc.IntegrityError as error:
        raise ConflictError(f"{what} conflicts with existing data: {error.orig}") from error
