"""Which backend ids can lower here (``BackendDetails``) and which can execute here (runtime)."""

from __future__ import annotations

import importlib

from pteforge.backends.telemetry import block_openvino_telemetry
from pteforge.quiet import OPENVINO_IMPORT_NOTICE, dropping_native_lines

# Importing these modules defines (and so registers upstream) the BackendDetails we ship.
LOWERING_BACKEND_MODULES: tuple[str, ...] = (
    "executorch.backends.xnnpack.xnnpack_preprocess",  # XnnpackBackend
    "executorch.backends.apple.coreml.compiler.coreml_preprocess",  # CoreMLBackend
    "executorch.backends.openvino.preprocess",  # OpenvinoBackend (its package imports nncf)
    "executorch.backends.vulkan.vulkan_preprocess",  # VulkanBackend
)


def register_lowering_backends() -> None:
    """Import the upstream ``BackendDetails`` implementations pteforge ships.

    Upstream finds a backend by scanning ``BackendDetails.__subclasses__()``, so a backend
    is usable for lowering only once its defining module is imported. Idempotent.
    """
    block_openvino_telemetry()
    with dropping_native_lines(OPENVINO_IMPORT_NOTICE):
        for module in LOWERING_BACKEND_MODULES:
            importlib.import_module(module)


def registered_backend_ids() -> list[str]:
    """Backend ids ``to_backend`` would find now, sorted.

    Mirrors upstream's lookup exactly: direct subclasses of ``BackendDetails``, by class name.
    """
    from executorch.exir.backend.backend_details import BackendDetails

    return sorted({cls.__name__ for cls in BackendDetails.__subclasses__()})


def executable_backend_ids() -> set[str]:
    """Backend ids the native ``executorch.runtime`` of this host can execute."""
    from executorch.runtime import Runtime

    return set(Runtime.get().backend_registry.registered_backend_names)
