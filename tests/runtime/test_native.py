"""Building the XNNPACK options shim: cached by content, clear error without a compiler."""

from __future__ import annotations

from pathlib import Path

import pytest

from pteforge.runtime import native
from pteforge.runtime.native import NativeBuildError, build_xnnpack_options


def test_build_is_cached(weight_cache_library: Path) -> None:
    again = build_xnnpack_options(weight_cache_library.parent)
    assert again == weight_cache_library
    assert again.stat().st_mtime_ns == weight_cache_library.stat().st_mtime_ns


def test_missing_compiler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    with pytest.raises(NativeBuildError, match="no C\\+\\+ compiler"):
        build_xnnpack_options(tmp_path)
