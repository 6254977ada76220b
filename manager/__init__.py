"""pteforge.manager: lower multi-method ``torch.export`` programs to one ExecuTorch program.

``to_edge(...).to_backend(...)`` accepts partitioners, whole-graph ``DelegationSpec``s or a
per-method mix and calls each backend's ``preprocess_multimethod`` once with every method.
``Plan`` and ``compile_programs`` run the JSON lowering plans of the service and the CLI.
"""

from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec

from pteforge.manager.errors import (
    LoweringError,
    ManagerError,
    PlanError,
    ProgramInputError,
    UnknownBackendIdError,
    UnknownMethodError,
)
from pteforge.manager.program_manager import ProgramManager, to_edge, to_edge_transform_and_lower

__all__ = [
    "CompileSpec",
    "DelegationSpec",
    "LoweringError",
    "ManagerError",
    "PlanError",
    "ProgramInputError",
    "ProgramManager",
    "UnknownBackendIdError",
    "UnknownMethodError",
    "to_edge",
    "to_edge_transform_and_lower",
]
