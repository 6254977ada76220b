"""Shared behaviour of catalog entries, and the kinds the manager dispatches on."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from pteforge.backends.kinds import EntryKind
from pteforge.backends.options import NoOptions, validate_options
from pteforge.backends.registry import executable_backend_ids
from pteforge.contracts.plan import PartitionerSpec

if TYPE_CHECKING:  # the catalog is read by the HTTP process, which never imports exir
    import torch
    from executorch.exir.backend.partitioner import DelegationSpec, Partitioner
    from torch.export import ExportedProgram

Options = Mapping[str, Any] | BaseModel | None
OptionsT = TypeVar("OptionsT", bound=BaseModel)


class BaseEntry(abc.ABC, Generic[OptionsT]):
    """A named lowering target with a typed options schema ``OptionsT``."""

    kind: ClassVar[EntryKind]
    options_model: type[OptionsT]
    name: str
    """The catalog name (a plan names the entry by it)."""
    backend_id: str | None
    """The ``BackendDetails`` class name this entry lowers to; None for no single backend."""
    description: str
    """One paragraph for ``GET /v1/backends``."""

    def validate(self, options: Options) -> OptionsT:
        """Options checked against :attr:`options_model`; raises ``InvalidOptionsError``."""
        return validate_options(self.name, self.options_model, options)

    def can_execute(self) -> bool:
        """Whether ``executorch.runtime`` on this host has the backend this entry targets."""
        return self.backend_id is None or self.backend_id in executable_backend_ids()

    def describe(self) -> dict[str, Any]:
        """JSON description: name, kind, backend_id, options_schema, can_execute, description."""
        return {
            "name": self.name,
            "kind": self.kind.value,
            "backend_id": self.backend_id,
            "options_schema": self.options_model.model_json_schema(),
            "can_execute": self.can_execute(),
            "description": self.description,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, backend_id={self.backend_id!r})"


class PortableEntry(BaseEntry[NoOptions]):
    """No delegation: every operator runs on the portable kernels of the runtime."""

    kind = EntryKind.PORTABLE
    options_model = NoOptions
    name = "portable"
    backend_id = None
    description = "No delegation: operators run on ExecuTorch's portable kernels."


class PartitionerEntry(BaseEntry[OptionsT]):
    """An entry that builds a ``Partitioner`` from its options."""

    kind = EntryKind.PARTITIONER
    quantized_refusal: ClassVar[str | None] = None
    """Why a plan that quantizes cannot lower with this entry (None: it can); the plan check
    refuses such a plan before any work, as lowering would."""
    required_recipe: ClassVar[str | None] = None
    """The quantization recipe whose graphs this entry lowers (None: any program); the plan
    check refuses a target that quantizes with another recipe."""

    def partitioner(self, options: Options = None) -> Partitioner:
        """A new partitioner configured by ``options`` (validated first)."""
        return self.build_partitioner(self.validate(options))

    @abc.abstractmethod
    def build_partitioner(self, options: OptionsT) -> Partitioner:
        """The partitioner for ``options``, already checked against :attr:`options_model`."""


class DelegateEntryBase(BaseEntry[OptionsT]):
    """An entry that builds a whole-graph ``DelegationSpec`` from its options."""

    kind = EntryKind.DELEGATE

    @abc.abstractmethod
    def delegation_spec(self, options: Options) -> DelegationSpec:
        """The ``DelegationSpec`` described by ``options`` (validated first)."""


class QuantizerEntryBase(BaseEntry[NoOptions]):
    """A quantization recipe applied to an exported program before lowering."""

    kind = EntryKind.QUANTIZER
    options_model = NoOptions

    @abc.abstractmethod
    def quantize(
        self,
        program: ExportedProgram,
        calibration: Sequence[tuple[torch.Tensor, ...]],
        lowering: Sequence[PartitionerSpec] = (),
    ) -> ExportedProgram:
        """The quantized program, calibrated on ``calibration`` (a list of input tuples),
        for the partitioners ``lowering`` that lower it next (a recipe whose annotation
        depends on the target reads its options there)."""
