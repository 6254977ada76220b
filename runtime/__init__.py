"""pteforge.runtime: run methods of ExecuTorch ``.pte`` artifacts in isolated worker processes.

No HTTP and no storage here: artifacts arrive as a sha256 plus a local path or a callable
that writes the file. See ``RuntimePool`` and ``describe_pte``.
"""

from pteforge.runtime.errors import (
    ArtifactIntegrityError,
    ExecutionError,
    InvalidInputError,
    PoolClosedError,
    ProgramLoadError,
    RuntimeLayerError,
    UnknownMethodError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from pteforge.runtime.metadata import MethodSignature, TensorNames, TensorSpec, describe_pte
from pteforge.runtime.pool import ArtifactSource, InferResult, PoolStats, RuntimePool

__all__ = [
    "ArtifactIntegrityError",
    "ArtifactSource",
    "ExecutionError",
    "InferResult",
    "InvalidInputError",
    "MethodSignature",
    "PoolClosedError",
    "PoolStats",
    "ProgramLoadError",
    "RuntimeLayerError",
    "RuntimePool",
    "TensorNames",
    "TensorSpec",
    "UnknownMethodError",
    "WorkerCrashedError",
    "WorkerTimeoutError",
    "describe_pte",
]
