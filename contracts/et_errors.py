"""The names of ExecuTorch's error codes, for messages that only carry the number.

ExecuTorch's Python bindings raise ``RuntimeError`` with the bare code
(``method->execute() failed with error 0x12``, ``Failed to load program, error: 0x:23``);
the names are those of ``enum class Error`` in ``executorch/runtime/core/error.h``
(installed under ``executorch/include``), which the bindings do not expose.
"""

from __future__ import annotations

import re

ERROR_NAMES: dict[int, str] = {
    0x00: "Ok",
    0x01: "Internal",
    0x02: "InvalidState",
    0x03: "EndOfMethod",
    0x04: "AlreadyLoaded",
    0x10: "NotSupported",
    0x11: "NotImplemented",
    0x12: "InvalidArgument",
    0x13: "InvalidType",
    0x14: "OperatorMissing",
    0x15: "RegistrationExceedingMaxKernels",
    0x16: "RegistrationAlreadyRegistered",
    0x20: "NotFound",
    0x21: "MemoryAllocationFailed",
    0x22: "AccessFailed",
    0x23: "InvalidProgram",
    0x24: "InvalidExternalData",
    0x25: "OutOfResources",
    0x30: "DelegateInvalidCompatibility",
    0x31: "DelegateMemoryAllocationFailed",
    0x32: "DelegateInvalidHandle",
}
"""ExecuTorch ``Error`` values by code (``runtime/core/error.h``)."""

# "error 0x12", "error: 0x:23", "error 0x12" at the end of a sentence; never a longer hex.
_CODE = re.compile(r"\b(error:? )0x:?([0-9a-fA-F]{1,2})\b")


def error_name(code: int) -> str:
    """The name of ExecuTorch error ``code`` (``Unknown`` for a value the table lacks)."""
    return ERROR_NAMES.get(code, "Unknown")


def name_error_codes(message: str) -> str:
    """``message`` with each ExecuTorch error code it quotes followed by its name:
    ``... error 0x12`` becomes ``... error 0x12 (InvalidArgument)``."""

    def named(match: re.Match[str]) -> str:
        code = int(match.group(2), 16)
        return f"{match.group(1)}0x{code:02x} ({error_name(code)})"

    return _CODE.sub(named, message)
