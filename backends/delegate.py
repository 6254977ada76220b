"""The ``delegate`` entry: whole-graph delegation to any registered backend id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pteforge.backends.entry import DelegateEntryBase, Options
from pteforge.backends.errors import UnknownBackendError
from pteforge.backends.options import DelegateOptions
from pteforge.backends.registry import (
    executable_backend_ids,
    register_lowering_backends,
    registered_backend_ids,
)

if TYPE_CHECKING:
    from executorch.exir.backend.partitioner import DelegationSpec


class DelegateEntry(DelegateEntryBase[DelegateOptions]):
    """Hands each whole method to the ``BackendDetails`` named by ``backend_id``."""

    options_model = DelegateOptions
    name = "delegate"
    backend_id = None
    description = (
        "Whole-graph DelegationSpec: every operator of the method goes to the "
        "registered backend id given in the options, or lowering fails."
    )

    def delegation_spec(self, options: Options) -> DelegationSpec:
        """A ``DelegationSpec``; an unregistered ``backend_id`` raises listing the known ones."""
        from executorch.exir.backend.compile_spec_schema import CompileSpec
        from executorch.exir.backend.partitioner import DelegationSpec

        parsed = self.validate(options)
        register_lowering_backends()
        known = registered_backend_ids()
        if parsed.backend_id not in known:
            raise UnknownBackendError("backend id", parsed.backend_id, known)
        specs = [CompileSpec(spec.key, spec.value()) for spec in parsed.compile_specs]
        return DelegationSpec(parsed.backend_id, specs)

    def can_execute(self) -> bool:
        """Whether at least one registered backend id can execute on this host."""
        return bool(self._executable_ids())

    def can_execute_backend(self, backend_id: str) -> bool:
        """Whether programs delegated to ``backend_id`` can execute on this host."""
        return backend_id in executable_backend_ids()

    def describe(self) -> dict[str, Any]:
        """The common description plus the backend ids accepted and those executable here."""
        register_lowering_backends()
        return {
            **super().describe(),
            "backend_ids": registered_backend_ids(),
            "executable_backend_ids": self._executable_ids(),
        }

    def _executable_ids(self) -> list[str]:
        register_lowering_backends()
        return sorted(set(registered_backend_ids()) & executable_backend_ids())
