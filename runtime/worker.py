"""The runtime worker process: loads programs by verified path, caches them, executes methods.

A worker serves one request at a time over a ``multiprocessing`` connection using the
framing of ``pteforge.runtime.wire``. A crash inside ExecuTorch kills only this process;
the pool notices the closed connection and starts a replacement.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from pteforge.runtime.errors import (
    ArtifactIntegrityError,
    ExecutionError,
    ProgramLoadError,
    RuntimeLayerError,
    UnknownMethodError,
    kind_of,
)
from pteforge.runtime.lru import ByteLRU
from pteforge.runtime.metadata import MethodSignature, describe_program, read_dynamism
from pteforge.runtime.validation import check_arrays
from pteforge.runtime.wire import recv_message, send_message


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs; plain data so it crosses the spawn boundary safely."""

    cache_bytes: int
    threads: int = 1
    weight_cache_library: str | None = None


@dataclass
class LoadedProgram:
    """A program held in a worker's cache, with the methods loaded from it so far."""

    program: Any
    signatures: dict[str, MethodSignature]
    methods: dict[str, Any] = field(default_factory=dict)


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verified_path(sha256: str, path: str) -> Path:
    """``path`` as a Path once its content hashes to ``sha256``; raises otherwise."""
    local = Path(path)
    if not local.is_file():
        raise ArtifactIntegrityError(f"artifact file {path} does not exist")
    actual = file_sha256(local)
    if actual != sha256:
        raise ArtifactIntegrityError(
            f"artifact file {path} has sha256 {actual}, expected {sha256}; refusing to load it"
        )
    return local


class Executor:
    """Loads, caches and runs programs inside one worker process."""

    def __init__(self, config: WorkerConfig) -> None:
        from executorch.runtime import Runtime

        self.runtime = Runtime.get()
        self.programs: ByteLRU[str, LoadedProgram] = ByteLRU(config.cache_bytes)
        self.weight_cache = False
        if config.weight_cache_library is not None:
            from pteforge.runtime.native import enable_xnnpack_weight_cache

            self.weight_cache = enable_xnnpack_weight_cache(Path(config.weight_cache_library))
        self.runtime._legacy_module._unsafe_reset_threadpool(config.threads)

    def program(self, sha256: str, path: str) -> tuple[LoadedProgram, bool]:
        """The cached program for ``sha256`` (True) or a freshly verified and loaded one."""
        cached = self.programs.get(sha256)
        if cached is not None:
            return cached, True
        local = verified_path(sha256, path)
        try:
            program = self.runtime.load_program(local)
        except Exception as exc:
            raise ProgramLoadError(f"ExecuTorch cannot load the artifact: {exc}") from exc
        loaded = LoadedProgram(program, describe_program(program, read_dynamism(local)))
        self.programs.put(sha256, loaded, local.stat().st_size)
        return loaded, False

    def method(self, loaded: LoadedProgram, name: str) -> Any:
        """Method ``name`` of ``loaded``, loading it on first use."""
        if name not in loaded.signatures:
            known = ", ".join(sorted(loaded.signatures))
            raise UnknownMethodError(f"the artifact has no method {name!r} (methods: {known})")
        if name not in loaded.methods:
            try:
                loaded.methods[name] = loaded.program.load_method(name)
            except Exception as exc:
                raise ProgramLoadError(f"cannot load method {name!r}: {exc}") from exc
        return loaded.methods[name]

    def describe(self, request: dict[str, Any]) -> dict[str, Any]:
        loaded, hit = self.program(request["sha256"], request["path"])
        return {"methods": {n: s.to_json() for n, s in loaded.signatures.items()}, "hit": hit}

    def infer(
        self, request: dict[str, Any], inputs: list[np.ndarray]
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        start = time.perf_counter()
        loaded, hit = self.program(request["sha256"], request["path"])
        method = self.method(loaded, request["method"])
        check_arrays(loaded.signatures[request["method"]], inputs)
        loaded_at = time.perf_counter()
        if request.get("profile"):
            from pteforge.runtime.profiling import profile_method

            outputs, profile = profile_method(self.runtime, request["path"], request, inputs)
        else:
            outputs, profile = run_method(method, inputs), None
        done = time.perf_counter()
        timings = {"load_ms": (loaded_at - start) * 1e3, "execute_ms": (done - loaded_at) * 1e3}
        return {"timings": timings, "hit": hit, "profile": profile}, outputs


def to_numpy(value: Any) -> np.ndarray:
    """An output value as a contiguous numpy array."""
    if hasattr(value, "numpy"):
        return np.ascontiguousarray(value.detach().numpy())
    return np.ascontiguousarray(np.asarray(value))


def run_method(method: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Execute an ExecuTorch method on numpy inputs; outputs as numpy arrays."""
    import torch

    tensors = [torch.from_numpy(a) for a in inputs]
    try:
        outputs = method.execute(tensors)
    except Exception as exc:
        raise ExecutionError(f"execution failed: {exc}") from exc
    return [to_numpy(o) for o in outputs]


def _handle(
    executor: Executor, header: dict[str, Any], arrays: list[np.ndarray]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    try:
        if header.get("op") == "describe":
            return dict(executor.describe(header), ok=True), []
        reply, outputs = executor.infer(header, arrays)
        return dict(reply, ok=True), outputs
    except RuntimeLayerError as exc:
        return {"ok": False, "kind": kind_of(exc), "message": str(exc)}, []
    except Exception as exc:  # anything else from ExecuTorch is that request's failure
        return {"ok": False, "kind": "execution", "message": f"{type(exc).__name__}: {exc}"}, []


def worker_main(conn: Connection, config: WorkerConfig) -> None:
    """Entry point of a worker process: serve requests until the connection closes."""
    try:
        executor = Executor(config)
    except Exception as exc:
        send_message(conn, {"ok": False, "kind": "load", "message": str(exc)}, [])
        return
    send_message(conn, {"ok": True, "weight_cache": executor.weight_cache}, [])
    while True:
        try:
            header, arrays = recv_message(conn, writable=True)
        except (EOFError, OSError):
            return
        reply, outputs = _handle(executor, header, arrays)
        send_message(conn, reply, outputs)
