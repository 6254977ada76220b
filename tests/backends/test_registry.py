"""Backend ids: those upstream lowering finds, and those the runtime here executes."""

from __future__ import annotations

import gc

from executorch.exir.backend.backend_details import BackendDetails

from pteforge.backends import (
    executable_backend_ids,
    register_lowering_backends,
    registered_backend_ids,
)


def test_registering_makes_the_shipped_backends_findable() -> None:
    register_lowering_backends()
    register_lowering_backends()  # idempotent
    ids = registered_backend_ids()
    assert {"XnnpackBackend", "CoreMLBackend"} <= set(ids)
    assert ids == sorted(ids)


def test_ids_mirror_upstream_lookup_of_direct_subclasses() -> None:
    register_lowering_backends()
    assert "DirectProbeBackend" not in registered_backend_ids()

    class DirectProbeBackend(BackendDetails):
        pass

    try:
        # Defining the class is all upstream needs to find it by its class name.
        assert "DirectProbeBackend" in registered_backend_ids()
    finally:
        del DirectProbeBackend
        gc.collect()


def test_runtime_here_executes_xnnpack_but_not_coreml() -> None:
    executable = executable_backend_ids()
    assert "XnnpackBackend" in executable
    assert "CoreMLBackend" not in executable
