"""Package names that load their module on first use (PEP 562).

``pteforge.manager`` re-exports ExecuTorch, which takes seconds to import, and
``pteforge.storage`` re-exports SQLAlchemy-backed classes a sandboxed loader never needs:
each maps its public names to their modules and imports one only when it is touched.
"""

from __future__ import annotations

import importlib
import importlib.util
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


def defer_package_init(package: str) -> None:
    """Register ``package`` (a dotted name whose parent is imported or importable) without
    running its ``__init__``: its submodules import as usual, and the first lookup of a
    name the ``__init__`` would define (``from package import X``) runs it then, in the same
    module object. A no-op if ``package`` is already imported.

    ``importlib.util.LazyLoader`` cannot do this: the import system reads a package's
    ``__path__`` to import a submodule, and any attribute read makes it load the package.
    """
    if package in sys.modules:
        return
    spec = importlib.util.find_spec(package)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no package named {package!r}", name=package)
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(name: str) -> Any:
        del module.__dict__["__getattr__"]  # once: the real __init__ answers from now on
        loader.exec_module(module)
        return getattr(module, name)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[package] = module
    parent, _, child = package.rpartition(".")
    if parent:
        setattr(importlib.import_module(parent), child, module)
