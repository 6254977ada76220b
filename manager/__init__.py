"""pteforge.manager: lower multi-method ``torch.export`` programs to one ExecuTorch program.

``to_edge(...).to_backend(...)`` accepts partitioners, whole-graph ``DelegationSpec``s or a
per-method mix and calls each backend's ``preprocess_multimethod`` once with every method.
``Plan`` and ``compile_programs`` run the JSON lowering plans of the service and the CLI.
"""

from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec

from pteforge.manager.compiler import CompiledProgram, compile_programs
from pteforge.manager.errors import (
    LoweringError,
    ManagerError,
    PlanError,
    ProgramInputError,
    UnknownBackendIdError,
    UnknownMethodError,
)
from pteforge.manager.loading import load_program_file
from pteforge.manager.plan import PartitionerRef, Plan, Target
from pteforge.manager.program_manager import ProgramManager, to_edge, to_edge_transform_and_lower
from pteforge.manager.signature import MethodSignature, TensorSpec, method_signature

__all__ = [
    "CompileSpec",
    "CompiledProgram",
    "DelegationSpec",
    "LoweringError",
    "ManagerError",
    "MethodSignature",
    "PartitionerRef",
    "Plan",
    "PlanError",
    "ProgramInputError",
    "ProgramManager",
    "Target",
    "TensorSpec",
    "UnknownBackendIdError",
    "UnknownMethodError",
    "compile_programs",
    "load_program_file",
    "method_signature",
    "to_edge",
    "to_edge_transform_and_lower",
]
