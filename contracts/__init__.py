"""Contracts every layer shares: plain rules and types that import nothing else of ours.

``pteforge.contracts`` sits below every layer (server, manager, runtime, storage, backends
may all import it; it imports none of them), so a rule stated here is enforced alike by the
library, the command line and the service.
"""

from pteforge.contracts.names import (
    METHOD_NAME_MAX_CHARS,
    METHOD_NAME_PATTERN,
    METHOD_NAME_RULE,
    InvalidMethodNameError,
    check_method_name,
)

__all__ = [
    "METHOD_NAME_MAX_CHARS",
    "METHOD_NAME_PATTERN",
    "METHOD_NAME_RULE",
    "InvalidMethodNameError",
    "check_method_name",
]
