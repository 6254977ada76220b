"""pteforge.manager: lower multi-method ``torch.export`` programs to one ExecuTorch program.

``to_edge(...).to_backend(...)`` accepts partitioners, whole-graph ``DelegationSpec``s or a
per-method mix and calls each backend's ``preprocess_multimethod`` once with every method.
``compile_programs`` runs the JSON lowering plans of the service and the CLI (one model,
``PlanSpec`` of ``pteforge.contracts.plan``; ``parse_plan`` validates one, naming a bad field);
``verify_numerics`` checks a compiled program in the native runtime against eager.

Names are loaded on first use: importing ExecuTorch takes seconds, and ``pteforge compile``
should reject a bad argument before paying for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pteforge.lazy import lazy_exports

if TYPE_CHECKING:
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.backend.partitioner import DelegationSpec

    from pteforge.contracts.plan import PlanSpec
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
    from pteforge.manager.plan import parse_plan
    from pteforge.manager.program_manager import (
        ProgramManager,
        to_edge,
        to_edge_transform_and_lower,
    )
    from pteforge.manager.signature import MethodSignature, TensorSpec, method_signature
    from pteforge.manager.verify import output_error, verify_numerics

_SOURCES: dict[str, str] = {
    "CompileSpec": "executorch.exir.backend.compile_spec_schema",
    "DelegationSpec": "executorch.exir.backend.partitioner",
    "CompiledProgram": "pteforge.manager.compiler",
    "compile_programs": "pteforge.manager.compiler",
    "LoweringError": "pteforge.manager.errors",
    "ManagerError": "pteforge.manager.errors",
    "PlanError": "pteforge.manager.errors",
    "ProgramInputError": "pteforge.manager.errors",
    "UnknownBackendIdError": "pteforge.manager.errors",
    "UnknownMethodError": "pteforge.manager.errors",
    "load_program_file": "pteforge.manager.loading",
    "PlanSpec": "pteforge.contracts.plan",
    "parse_plan": "pteforge.manager.plan",
    "ProgramManager": "pteforge.manager.program_manager",
    "to_edge": "pteforge.manager.program_manager",
    "to_edge_transform_and_lower": "pteforge.manager.program_manager",
    "MethodSignature": "pteforge.manager.signature",
    "TensorSpec": "pteforge.manager.signature",
    "method_signature": "pteforge.manager.signature",
    "output_error": "pteforge.manager.verify",
    "verify_numerics": "pteforge.manager.verify",
}

__all__ = [
    "CompileSpec",
    "CompiledProgram",
    "DelegationSpec",
    "LoweringError",
    "ManagerError",
    "MethodSignature",
    "PlanError",
    "PlanSpec",
    "ProgramInputError",
    "ProgramManager",
    "TensorSpec",
    "UnknownBackendIdError",
    "UnknownMethodError",
    "compile_programs",
    "load_program_file",
    "method_signature",
    "output_error",
    "parse_plan",
    "to_edge",
    "to_edge_transform_and_lower",
    "verify_numerics",
]

__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)
