"""The names of ExecuTorch's error codes, for messages that only carry the number.

ExecuTorch's Python bindings raise ``RuntimeError`` with the bare code
(``method->execute() failed with error 0x12``, ``Failed to load program, error: 0x:23``);
the names are those of ``enum class Error`` in ``executorch/runtime/core/error.h``
(installed under ``executorch/include``), which the bindings do not expose.
``failure_message`` adds what the native runtime logged (``ET_LOG`` lines such as
``[XNNExecutor.cpp:169] Internal Error: ...``), for the runtime's answers and the manager's
numerics check alike.
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

MAX_LOG_CHARS = 2000
"""The most characters of native log one error message carries."""

# ANSI escape sequences (CSI and two-character ones), then any other control character.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 but newline and tab, DEL and C1: what must not reach a terminal or a log as it is
(ESC and CSI start the sequences that move the cursor or write the clipboard)."""

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


def clean_lines(text: str) -> list[str]:
    """The non-blank lines of ``text`` without ANSI escapes or control characters."""
    lines = (CONTROL_CHARACTERS.sub("", _ANSI.sub("", line)).strip() for line in text.splitlines())
    return [line for line in lines if line]


def bounded(lines: list[str], limit: int = MAX_LOG_CHARS) -> str:
    """``lines`` joined by newlines, cut to ``limit`` characters (saying how many went)."""
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


LOG_HEADER = "\nruntime log:\n"
"""What separates a message from the native log lines it carries."""


def log_suffix(log: str) -> str:
    """``LOG_HEADER`` and the lines of ``log`` (cleaned and bounded); empty if it has none."""
    lines = clean_lines(log)
    return f"{LOG_HEADER}{bounded(lines)}" if lines else ""


def failure_message(message: str, log: str) -> str:
    """A failed request's message: ``message`` with its ExecuTorch error codes named, then
    the native runtime's own log lines of that request (cleaned and bounded), if any."""
    return name_error_codes(message) + log_suffix(log)


MAX_CAUSES = 4
"""The most errors of a ``__cause__`` chain :func:`described` quotes."""


def described(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` and of each error it was raised from.

    Upstream pass managers wrap the real failure (torch.fx's ``PassManager``: "An error
    occurred when running the 'ChannelsLastTaggedReshapePass' pass ...", raised from the
    ``RuntimeError`` that says what went wrong); the message alone would drop the reason.
    """
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(parts) < MAX_CAUSES:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__
    return " <- caused by ".join(parts)
