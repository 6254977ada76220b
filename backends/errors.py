"""Errors of the backend catalog layer."""

from __future__ import annotations

from collections.abc import Iterable


class BackendCatalogError(Exception):
    """Root of every error raised by ``pteforge.backends``."""


class UnknownBackendError(BackendCatalogError, LookupError):
    """A catalog name or backend id that is not registered; the message lists the known ones."""

    def __init__(self, what: str, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        super().__init__(f"unknown {what} {name!r}; registered: {', '.join(self.known)}")


class InvalidOptionsError(BackendCatalogError, ValueError):
    """Options given for a catalog entry do not match its schema."""
