"""Third-party import noise is filtered at the entry points, and only that noise."""

from __future__ import annotations

import subprocess
import sys

_IMPORTS = "import torchao, executorch.exir, executorch.runtime"


def _stderr_of(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    return done.stderr


def test_the_noise_exists_without_the_filter() -> None:
    """Guards the test below: if torch stops printing this, the filter is dead code."""
    assert "Failed to load" in _stderr_of(_IMPORTS)


def test_preloading_the_quiet_module_silences_imports() -> None:
    stderr = _stderr_of(f"import pteforge.quiet_on_import; {_IMPORTS}")
    assert "Failed to load" not in stderr, stderr
    assert "register_constant" not in stderr, stderr


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
        "log.warning('a real conversion warning')"
    )
    assert "has not been tested" not in stderr, stderr
    assert "a real conversion warning" in stderr
