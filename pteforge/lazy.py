"""Package names that load their module on first use (PEP 562).

``pteforge.manager`` re-exports ExecuTorch, which takes seconds to import, and
``pteforge.storage`` re-exports SQLAlchemy-backed classes a sandboxed loader never needs:
each maps its public names to their modules and imports one only when it is touched.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, sources: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose ``sources`` maps each public
    name to the module defining it. A loaded name is cached in the package's namespace."""

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[package]), *sources])

    return __getattr__, __dir__
