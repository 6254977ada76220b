"""Errors of the backend catalog layer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from pteforge.contracts.errors import ErrorCode


class BackendCatalogError(Exception):
    """Root of every error raised by ``pteforge.backends``; one of no kind below is a bug."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL_ERROR


class UnknownBackendError(BackendCatalogError, LookupError):
    """A catalog name or backend id that is not registered; the message lists the known ones."""

    code = ErrorCode.UNKNOWN_BACKEND

    def __init__(self, what: str, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        super().__init__(f"unknown {what} {name!r}; registered: {', '.join(self.known)}")


class InvalidOptionsError(BackendCatalogError, ValueError):
    """Options given for a catalog entry do not match its schema."""

    code = ErrorCode.INVALID_OPTIONS


class UnsupportedNodeError(BackendCatalogError):
    """A catalog partitioner refuses a program because of one node; names it and its operator
    (the manager reports them with the method and backend id as a lowering failure)."""

    code = ErrorCode.LOWERING_FAILED

    def __init__(self, reason: str, node: str, operator: str) -> None:
        self.reason = reason
        self.node = node
        self.operator = operator
        super().__init__(f"{reason} (node {node!r}, operator {operator})")
