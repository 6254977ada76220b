"""Errors of the manager layer: one root, plain attributes so callers can map them; each class
declares its ``ErrorCode`` (``code``), which failed jobs and HTTP answers both carry."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from pteforge.contracts.errors import ErrorCode


class ManagerError(Exception):
    """Root of every error raised by ``pteforge.manager``."""

    code: ClassVar[ErrorCode] = ErrorCode.COMPILE_FAILED


class ProgramInputError(ManagerError, ValueError):
    """A program file or mapping given to the manager is unusable."""

    code = ErrorCode.INVALID_PROGRAM

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(message)


class PlanError(ManagerError, ValueError):
    """A lowering plan is malformed; ``field`` is the dotted path of the bad field."""

    code = ErrorCode.INVALID_PLAN

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"plan field {field!r}: {message}")


class UnknownMethodError(ManagerError, LookupError):
    """A plan or mapping names a method the program does not have: the caller's mistake,
    like any other in a plan."""

    code = ErrorCode.INVALID_PLAN

    def __init__(self, method: str, known: Iterable[str], field: str | None = None) -> None:
        self.method = method
        self.known = sorted(known)
        self.field = field
        where = f"{field}: " if field else ""
        super().__init__(
            f"{where}unknown method {method!r}; the program has: {', '.join(self.known)}"
        )


class UnknownBackendIdError(ManagerError, LookupError):
    """A backend id that no ``BackendDetails`` subclass provides."""

    code = ErrorCode.UNKNOWN_BACKEND

    def __init__(self, backend_id: str, known: Iterable[str], method: str | None = None) -> None:
        self.backend_id = backend_id
        self.method = method
        self.known = sorted(known)
        where = f" (method {method!r})" if method else ""
        super().__init__(
            f"unknown backend id {backend_id!r}{where}; registered: {', '.join(self.known)}"
        )


class LoweringError(ManagerError, RuntimeError):
    """A backend could not take (part of) a method; names the first offending node.

    ``backend_id`` is None when upstream failed before any backend partitioned the method
    (``to_edge``'s decompositions on a data-dependent slice they cannot guard on, say): no
    backend is to blame, and the message says so rather than name one."""

    code = ErrorCode.LOWERING_FAILED

    def __init__(
        self,
        *,
        method: str | None,
        backend_id: str | None,
        node: str | None,
        operator: str | None,
        detail: str = "",
    ) -> None:
        self.method = method
        self.backend_id = backend_id
        self.node = node
        self.operator = operator
        self.detail = detail
        subject = f"method {method!r}" if method is not None else "the program"
        if backend_id is None:
            message = f"{subject} failed before any backend partitioned it"
        elif node:
            where = f"node {node!r} (operator {operator})"
            message = f"{subject}: backend {backend_id!r} cannot lower {where}"
        else:  # upstream raised naming no node pteforge can place: its reason is the detail
            message = f"{subject}: backend {backend_id!r} could not lower it"
        super().__init__(f"{message}: {detail}" if detail else message)
