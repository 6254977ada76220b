"""Third-party import noise is filtered at the entry points, and only that noise.

Importing torch and ExecuTorch costs seconds of CPU: one interpreter imports them without the
filter and one with it (each then starts ExecuTorch's native thread pool, the plain one by
first use, the quiet one through ``start_native_threadpool``), and the tests read their
stderr (module-scoped fixtures)."""

from __future__ import annotations

import subprocess
import sys

import pytest

_IMPORTS = "import torchao, executorch.exir, executorch.runtime"
_PORTABLE = "from executorch.extension.pybindings import portable_lib as p"


def _stderr_of(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    return done.stderr


@pytest.fixture(scope="module")
def plain_stderr() -> str:
    """The heavy imports, then the thread pool's first use, with no filter."""
    return _stderr_of(f"{_IMPORTS}; {_PORTABLE}; p._threadpool_get_thread_count()")


@pytest.fixture(scope="module")
def quiet_stderr() -> str:
    """The same with ``pteforge.quiet_on_import`` preloaded and the pool started through
    ``start_native_threadpool``, then a line of our own written to fd 2."""
    return _stderr_of(
        f"import os, pteforge.quiet_on_import; {_IMPORTS}; import pteforge.quiet as q; "
        f"{_PORTABLE}; q.start_native_threadpool(); p._threadpool_get_thread_count(); "
        "os.write(2, b'ours')"
    )


def test_the_noise_exists_without_the_filter(plain_stderr: str) -> None:
    """Guards the test below: if torch stops printing this, the filter is dead code."""
    assert "Failed to load" in plain_stderr


def test_preloading_the_quiet_module_silences_imports(quiet_stderr: str) -> None:
    assert "Failed to load" not in quiet_stderr, quiet_stderr
    assert "register_constant" not in quiet_stderr, quiet_stderr


def test_own_warnings_still_show() -> None:
    stderr = _stderr_of(
        "import warnings, pteforge.quiet_on_import; warnings.warn('ours', FutureWarning)"
    )
    assert "ours" in stderr


def test_only_the_workflow_notice_of_the_xnnpack_partitioner_is_dropped() -> None:
    log = "logging.getLogger('executorch.backends.xnnpack.partition.xnnpack_partitioner')"
    stderr = _stderr_of(
        "import logging, pteforge.quiet_on_import; "
        f'{log}.warning("DEPRECATION WARNING: You are using the deprecated '
        "'to_edge() + to_backend()' workflow.\"); "
        f"{log}.warning('a real partitioner warning')"
    )
    assert "to_edge() + to_backend()" not in stderr, stderr
    assert "a real partitioner warning" in stderr


def test_coremltools_version_checks_are_dropped() -> None:
    stderr = _stderr_of(
        "import logging, pteforge.quiet_on_import; log = logging.getLogger('coremltools'); "
        "log.warning('Torch version 2.13.0+cpu has not been tested with coremltools.'); "
        'log.warning("Failed to load _MLModelProxy: No module named '
        "'coremltools.libcoremlpython'\"); "
        "log.warning('a real conversion warning')"
    )
    assert "has not been tested" not in stderr, stderr
    assert "_MLModelProxy" not in stderr, stderr
    assert "a real conversion warning" in stderr


def test_the_native_thread_pool_starts_without_its_cpu_probe(
    plain_stderr: str, quiet_stderr: str
) -> None:
    """ExecuTorch's thread pool logs how it probed the CPU on first use; started through
    ``start_native_threadpool`` it does not, and what else goes to stderr still shows."""
    assert "cpuinfo_utils" in plain_stderr
    assert "cpuinfo_utils" not in quiet_stderr and "ours" in quiet_stderr, quiet_stderr


def test_the_fake_program_fallback_notice_is_dropped() -> None:
    """``pteforge compile`` of a method without inputs printed upstream's root-logger
    "Error in get_fake_program for graph ..., fallback to deepcopy" with the whole graph."""
    stderr = _stderr_of(
        "import logging, pteforge.quiet_on_import; "
        "logging.warning('Error in get_fake_program for graph GraphModule(), fallback'); "
        "logging.warning('a real warning')"
    )
    assert "get_fake_program" not in stderr, stderr
    assert "a real warning" in stderr


def test_a_captured_run_keeps_the_thread_pools_probe_off_stderr(plain_stderr: str) -> None:
    """The numerics check captures the native log of each method it runs and writes it back:
    the first run's thread pool probe (``[cpuinfo_utils.cpp:71] Reading file ...``) showed
    on ``pteforge compile``'s stderr. What else was logged still shows and is kept."""
    if "cpuinfo_utils" not in plain_stderr:
        pytest.skip("this CPU's thread pool logs no probe")
    stderr = _stderr_of(
        f"import os, pteforge.quiet as q; {_PORTABLE}\n"
        "with q.keeping_native_lines() as got:\n"
        "    p._threadpool_get_thread_count(); os.write(2, b'ours\\n')\n"
        "assert got == ['ours\\n'], got"
    )
    assert "cpuinfo_utils" not in stderr and "ours" in stderr, stderr
