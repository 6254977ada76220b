"""The toolchain versions (torch, executorch) this server compiles and runs with."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

from pydantic import BaseModel

_PACKAGES = ("torch", "executorch")


class Toolchain(BaseModel):
    """Installed versions of the packages that lower and run programs."""

    torch: str | None
    executorch: str | None


def _installed(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


@cache
def toolchain() -> Toolchain:
    """The versions known to this server, read once."""
    torch, executorch = (_installed(package) for package in _PACKAGES)
    return Toolchain(torch=torch, executorch=executorch)
