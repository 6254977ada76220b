"""Build and load the C++ shim that sets XnnpackBackend options (the packed-weight cache).

The shim is compiled on first use into a caller-chosen directory, against the headers and
``libexecutorch.so`` that the executorch wheel ships, and cached there by a hash of its
source, the compiler command and the executorch install.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pteforge.runtime.errors import RuntimeLayerError

SOURCE = Path(__file__).with_name("xnnpack_options.cpp")


class NativeBuildError(RuntimeLayerError):
    """The XNNPACK options shim could not be compiled or loaded."""


def _executorch_dir() -> Path:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise NativeBuildError("executorch is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _compile_command(compiler: str, output: Path) -> list[str]:
    et = _executorch_dir()
    lib = et / "lib"
    return [
        compiler, "-std=c++17", "-O2", "-shared", "-fPIC",
        # The wheel ships c10 headers without torch's generated cmake_macros.h.
        "-DC10_USING_CUSTOM_GENERATED_MACROS",
        f"-I{et / 'include'}",
        f"-I{et / 'include/executorch/runtime/core/portable_type/c10'}",
        str(SOURCE), f"-L{lib}", "-lexecutorch", f"-Wl,-rpath,{lib}", "-o", str(output),
    ]  # fmt: skip


def build_xnnpack_options(build_dir: Path) -> Path:
    """Compile the shim into ``build_dir`` unless an up-to-date build is there; return its path."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise NativeBuildError("no C++ compiler (g++ or c++) on PATH to build the XNNPACK shim")
    key = hashlib.sha256(SOURCE.read_bytes())
    key.update(" ".join(_compile_command(compiler, Path("out"))).encode())
    key.update(str((_executorch_dir() / "lib" / "libexecutorch.so").stat().st_mtime_ns).encode())
    target = build_dir / f"libpteforge_xnnpack_options-{key.hexdigest()[:16]}.so"
    if target.exists():
        return target
    build_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(suffix=".so", dir=build_dir)
    os.close(fd)
    result = subprocess.run(
        _compile_command(compiler, Path(tmp_name)), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        os.unlink(tmp_name)
        raise NativeBuildError(f"building the XNNPACK shim failed:\n{result.stderr[-2000:]}")
    os.replace(tmp_name, target)
    return target


def set_xnnpack_weight_cache(library: Path, enabled: bool) -> bool:
    """Turn XnnpackBackend's packed-weight cache on or off in this process for the delegates
    initialised from now on (a method load initialises its delegates); returns the new state.

    Must run after ``executorch.runtime`` is imported, so the shim binds to the same
    ``libexecutorch.so`` (and backend registry) as the Python bindings.
    """
    import executorch.runtime  # noqa: F401  (loads libexecutorch.so first)

    shim = ctypes.CDLL(str(library))
    err = shim.pteforge_xnnpack_set_weight_cache(int(enabled))
    if err != 0:
        raise NativeBuildError(f"set_option(XnnpackBackend, weight_cache_enabled) failed: {err}")
    state = ctypes.c_int(0)
    if shim.pteforge_xnnpack_get_weight_cache(ctypes.byref(state)) != 0:
        raise NativeBuildError("get_option(XnnpackBackend, weight_cache_enabled) failed")
    return bool(state.value)
