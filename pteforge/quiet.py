"""Third-party noise kept out of pteforge's output, set once at each entry point.

Importing torch, torchao and ExecuTorch prints lines that say nothing about the user's work:
torchao's optional CUDA kernels that cannot load on a CPU host, torch's deprecation notice
about an Enum registered by torchao, ``FutureWarning``/``DeprecationWarning``s from their
internals. They are filtered by origin only, so pteforge's own warnings and real errors of
these libraries still show. Forked children inherit the filters; entry points of freshly
started interpreters (fork servers, ``pteforge`` itself) call :func:`quiet_third_party`.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr

_NOISY_LOGGERS = {
    "torchao": logging.ERROR,  # "Failed to load .../_C_mxfp8...so" on every CPU-only import
    "torch.utils._pytree": logging.ERROR,  # "... Enum subclass ... register_constant()"
}
_NOISY_WARNING_MODULES = r"^(torch|torchao|executorch|transformers|coremltools)(\.|$)"
_NOISY_WARNING_MESSAGES = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",)
# Log lines dropped by message, per logger; the loggers' other records still show.
_NOISY_LOG_MESSAGES = {
    # pteforge lowers with to_edge + to_backend on purpose (a DelegationSpec per method needs
    # it); XNNPACK's partitioner logs a deprecation notice about that on every partition.
    "executorch.backends.xnnpack.partition.xnnpack_partitioner": (
        "deprecated 'to_edge() + to_backend()' workflow",
    ),
    # Version checks and the macOS-only native library, at import of an optional converter
    # pteforge never uses.
    # ExecuTorch's to_backend partitions a copy of each method, made with fake tensors when
    # it can; a method without inputs (an init_state) has no fake mode, and the deepcopy it
    # falls back to is logged on the root logger with the whole graph, as an "Error".
    "root": ("Error in get_fake_program for graph",),
    "coremltools": (
        "scikit-learn version",
        "has not been tested with coremltools",
        "No module named 'coremltools.libcoremlpython'",
    ),
}


class _DropMessages(logging.Filter):
    def __init__(self, fragments: tuple[str, ...]) -> None:
        super().__init__()
        self.fragments = fragments

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(fragment in message for fragment in self.fragments)


def quiet_third_party() -> None:
    """Silence the known import-time noise of torch, torchao and ExecuTorch (idempotent)."""
    for name, level in _NOISY_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category, module=_NOISY_WARNING_MODULES)
    for message in _NOISY_WARNING_MESSAGES:  # raised with a stack level outside torch
        warnings.filterwarnings("ignore", message=message)
    for name, fragments in _NOISY_LOG_MESSAGES.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropMessages) for f in logger.filters):
            logger.addFilter(_DropMessages(fragments))


# What ExecuTorch's thread pool logs from C++ while it counts the CPU's performant cores (it
# reads ARM-only files, then falls back to the core count), once per process at first use.
_THREADPOOL_PROBE = re.compile(rb"^\[cpuinfo_utils\.cpp:\d+\] ")
# What the tokenizers library bundled with OpenVINO logs from C++ when it loads.
OPENVINO_IMPORT_NOTICE = re.compile(rb"^I tokenizers:regex\.cpp:\d+\] Registering override ")


@contextmanager
def _fd2_captured(lines: list[bytes]) -> Iterator[None]:
    """Run the body with file descriptor 2 captured; ``lines`` then holds what it got."""
    sys.stderr.flush()
    captured = os.memfd_create("pteforge-native-log", os.MFD_CLOEXEC)
    saved = os.dup(2)
    try:
        os.dup2(captured, 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            lines += os.pread(captured, os.fstat(captured).st_size, 0).splitlines(keepends=True)
    finally:
        os.close(saved)
        os.close(captured)


@contextmanager
def dropping_native_lines(pattern: re.Pattern[bytes]) -> Iterator[None]:
    """Run the body with file descriptor 2 captured, then write back every line it got but
    those ``pattern`` matches: native libraries log to fd 2 directly, past ``sys.stderr``."""
    lines: list[bytes] = []
    try:
        with _fd2_captured(lines):
            yield
    finally:
        kept = b"".join(line for line in lines if not pattern.match(line))
        if kept:
            os.write(2, kept)


@contextmanager
def keeping_native_lines() -> Iterator[list[str]]:
    """Run the body with file descriptor 2 and ``sys.stderr`` captured (ExecuTorch's
    bindings log through ``sys.stderr`` when it is not fd 2, under pytest say) and yield a
    list that, once the body ends (raising or not), holds what was logged there; all of it
    is written back too. The thread pool's CPU probe is left out of both (``pteforge
    compile``'s numerics check printed its lines)."""
    lines: list[bytes] = []
    text: list[str] = []
    python = io.StringIO()
    try:
        with _fd2_captured(lines), redirect_stderr(python):
            yield text
    finally:
        native = _without_probe(lines)
        if native:
            os.write(2, b"".join(native))
        bindings = _without_probe(python.getvalue().encode().splitlines(keepends=True))
        sys.stderr.write(b"".join(bindings).decode(errors="replace"))
        text += [line.decode(errors="replace") for line in native + bindings]


def _without_probe(lines: list[bytes]) -> list[bytes]:
    return [line for line in lines if not _THREADPOOL_PROBE.match(line)]


def start_native_threadpool() -> None:
    """Create ExecuTorch's native thread pool now, keeping out of stderr only the lines it
    logs while probing the CPU (anything else it writes still shows). Call it after the
    process confined itself: threads started before Landlock applies stay unconfined."""
    from executorch.extension.pybindings import portable_lib

    with dropping_native_lines(_THREADPOOL_PROBE):
        portable_lib._threadpool_get_thread_count()
