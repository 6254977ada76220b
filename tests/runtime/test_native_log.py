"""The native log capture of a runtime worker and the failure messages built from it."""

from __future__ import annotations

import os
from pathlib import Path

from pteforge.contracts.et_errors import (
    MAX_LOG_CHARS,
    error_name,
    failure_message,
    name_error_codes,
)
from pteforge.runtime.native_log import LOG_FILE, MAX_LEFTOVER_BYTES, NativeLog, leftover


def test_error_codes_are_named_as_in_error_h() -> None:
    assert error_name(0x12) == "InvalidArgument" and error_name(0x23) == "InvalidProgram"
    assert error_name(0x99) == "Unknown"
    assert (
        name_error_codes("method->execute() failed with error 0x12")
        == "method->execute() failed with error 0x12 (InvalidArgument)"
    )
    assert (
        name_error_codes("Failed to load program, error: 0x:23")
        == "Failed to load program, error: 0x23 (InvalidProgram)"
    )
    assert name_error_codes("address 0x7f12ab") == "address 0x7f12ab"


def test_failure_message_is_cleaned_and_bounded() -> None:
    log = "\x1b[31m[op.cpp:1] bad\x1b[0m \x07index\r\n\n  \n" + "x" * (3 * MAX_LOG_CHARS)
    message = failure_message("failed with error 0x12", log)
    head, _, lines = message.partition("\nruntime log:\n")
    assert head == "failed with error 0x12 (InvalidArgument)"
    assert lines.startswith("[op.cpp:1] bad index\nxxx")
    assert "\x1b" not in message and "\x07" not in message and "\r" not in message
    assert len(lines) < MAX_LOG_CHARS + 50 and lines.endswith("more characters)")
    assert failure_message("plain", "\n \n") == "plain"


def test_capture_takes_only_what_was_written_since_the_last_take(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    target = os.dup(write_end)  # stands for the worker's stderr
    log = NativeLog(tmp_path / LOG_FILE, target)
    try:
        os.write(target, b"[method.cpp:1] first request\n")
        assert log.take() == "[method.cpp:1] first request\n"
        assert log.take() == ""
        os.write(target, b"second\n")
        assert log.take() == "second\n"
    finally:
        log.close()
        os.close(target)
        os.close(write_end)
    with os.fdopen(read_end, "rb") as forwarded:  # everything also reached the original
        assert forwarded.read() == b"[method.cpp:1] first request\nsecond\n"


def test_what_a_dead_worker_never_took_is_left_over(tmp_path: Path) -> None:
    assert leftover(tmp_path) == ""  # it never started capturing
    stderr = os.open(tmp_path / "stderr", os.O_WRONLY | os.O_CREAT, 0o600)
    log = NativeLog(tmp_path / LOG_FILE, stderr)
    os.write(stderr, b"taken\n")
    log.take()
    os.write(stderr, b"x" * MAX_LEFTOVER_BYTES + b"[abort.cpp:1] the last words\n")
    tail = leftover(tmp_path)  # as the pool reads it, the worker being gone
    assert tail.endswith("the last words\n") and len(tail) == MAX_LEFTOVER_BYTES
    assert "taken" not in tail
    log.close()
    os.close(stderr)
