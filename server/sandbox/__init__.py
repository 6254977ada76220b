"""Hostile-input defences for uploads: static pt2 validation and disposable loader processes.

Framework-free on purpose (no FastAPI): the server maps ``UploadRejectedError.http_status`` and
``reason`` to its JSON error answers.
"""

from .digests import read_verified, sha256_file
from .errors import (
    InvalidPteError,
    IsolatedLoadError,
    UnsafeArchiveError,
    UploadRejectedError,
    UploadTooLargeError,
)
from .forked import ForkServerIsolation
from .isolation import Isolation, SubprocessIsolation
from .limits import ArchiveLimits, ProcessLimits
from .pt2_isolated import load_programs_isolated
from .pt2_loader import load_validated_programs
from .pt2_validator import validate_pt2_archive
from .pte_isolated import validate_pte_isolated
from .specs import (
    ArchiveManifest,
    MethodSignature,
    ProgramDescription,
    PteDescription,
    TensorSpec,
    methods_to_json,
)

__all__ = [
    "ArchiveLimits",
    "ArchiveManifest",
    "ForkServerIsolation",
    "InvalidPteError",
    "IsolatedLoadError",
    "Isolation",
    "MethodSignature",
    "ProcessLimits",
    "ProgramDescription",
    "PteDescription",
    "SubprocessIsolation",
    "TensorSpec",
    "UnsafeArchiveError",
    "UploadRejectedError",
    "UploadTooLargeError",
    "load_programs_isolated",
    "load_validated_programs",
    "methods_to_json",
    "read_verified",
    "sha256_file",
    "validate_pt2_archive",
    "validate_pte_isolated",
]
