"""The runtime worker process: loads programs by verified path, caches them, executes methods.

A worker serves one request at a time over a ``multiprocessing`` connection using the
framing of ``pteforge.runtime.wire``. A crash inside ExecuTorch kills only this process;
the pool notices the closed connection and starts a replacement.

Stateless requests start from the program's initial state (``ProgramInstance``); a request
carrying ``session`` runs on the instance that session owns in this worker, opened by the
request that says ``open`` and dropped after the one that says ``close`` (or by ``drop``).
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
    RuntimeLayerError,
    SessionLostError,
    UnknownMethodError,
    kind_of,
)
from pteforge.runtime.instances import ProgramInstance, opaque_state
from pteforge.runtime.lru import ByteLRU
from pteforge.runtime.metadata import MethodSignature, describe_program, read_dynamism
from pteforge.runtime.state import ProgramState, read_program_state
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
    """A verified program held in a worker's cache: the instance stateless requests run on,
    and fresh instances kept ready for methods whose state cannot be reset in place."""

    sha256: str
    path: Path
    instance: ProgramInstance
    signatures: dict[str, MethodSignature]
    state: ProgramState
    spares: dict[str, ProgramInstance] = field(default_factory=dict)


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
        self.sessions: dict[int, tuple[str, ProgramInstance]] = {}
        self._refill: list[tuple[LoadedProgram, str]] = []
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
        state = read_program_state(local)
        instance = ProgramInstance(
            self.runtime, local, state or ProgramState({}), eager=state is None or state.stateful
        )
        if state is None:  # unreadable flatbuffer: assume every method keeps state
            instance.state = state = opaque_state(instance.program)
        signatures = describe_program(instance.program, read_dynamism(local))
        loaded = LoadedProgram(sha256, local, instance, signatures, state)
        self.programs.put(sha256, loaded, local.stat().st_size)
        return loaded, False

    def describe(self, request: dict[str, Any]) -> dict[str, Any]:
        loaded, hit = self.program(request["sha256"], request["path"])
        methods = {n: s.to_json() for n, s in loaded.signatures.items()}
        return {"methods": methods, "state": loaded.state.to_json(), "hit": hit}

    def stateless(self, loaded: LoadedProgram, name: str) -> tuple[ProgramInstance, Any]:
        """An instance and its method ``name`` in the program's initial state."""
        state = loaded.state.method(name)
        if not state.stateful or state.resettable:
            method = loaded.instance.method(name)
            loaded.instance.reset(name)
            return loaded.instance, method
        fresh = loaded.spares.pop(name, None)
        if fresh is None:
            fresh = ProgramInstance(self.runtime, loaded.path, loaded.state, eager=False)
        self._refill.append((loaded, name))  # the next one is loaded after replying
        return fresh, fresh.method(name)

    def session(self, request: dict[str, Any], loaded: LoadedProgram) -> ProgramInstance:
        """The instance of the request's session, opened now if the request says so."""
        sid = int(request["session"])
        if request.get("open"):
            instance = ProgramInstance(self.runtime, loaded.path, loaded.state, eager=True)
            self.sessions[sid] = (request["sha256"], instance)
        entry = self.sessions.get(sid)
        if entry is None or entry[0] != request["sha256"]:
            raise SessionLostError(f"this runtime worker holds no session {sid}")
        return entry[1]

    def infer(
        self, request: dict[str, Any], inputs: list[np.ndarray]
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        start = time.perf_counter()
        loaded, hit = self.program(request["sha256"], request["path"])
        name = request["method"]
        if name not in loaded.signatures:
            known = ", ".join(sorted(loaded.signatures))
            raise UnknownMethodError(f"the artifact has no method {name!r} (methods: {known})")
        check_arrays(loaded.signatures[name], inputs)
        if "session" in request:
            instance = self.session(request, loaded)
            method = instance.method(name)
        else:  # the instance is held until the method has run: it owns the method's memory
            instance, method = self.stateless(loaded, name)
        loaded_at = time.perf_counter()
        if request.get("profile"):
            from pteforge.runtime.profiling import profile_method

            outputs, profile = profile_method(self.runtime, request["path"], request, inputs)
        else:
            outputs, profile = run_method(method, inputs), None
        done = time.perf_counter()
        timings = {"load_ms": (loaded_at - start) * 1e3, "execute_ms": (done - loaded_at) * 1e3}
        return {"timings": timings, "hit": hit, "profile": profile}, outputs

    def end_sessions(self, request: dict[str, Any], failed: bool) -> None:
        """Drop the sessions a request ends: ``close``, a failed ``open``, or ``drop``."""
        sid = request.get("session")
        if sid is not None and (request.get("close") or (failed and request.get("open"))):
            self.sessions.pop(int(sid), None)
        for dropped in request.get("drop", ()):
            self.sessions.pop(int(dropped), None)

    def idle(self) -> None:
        """Work done between requests: fresh instances for the methods that used one."""
        while self._refill:
            loaded, name = self._refill.pop()
            if name in loaded.spares or loaded.sha256 not in self.programs:
                continue
            try:
                spare = ProgramInstance(self.runtime, loaded.path, loaded.state, eager=False)
                spare.method(name)
            except RuntimeLayerError:
                continue  # the next request loads it itself, and reports the error
            loaded.spares[name] = spare


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


def _serve(
    executor: Executor, header: dict[str, Any], arrays: list[np.ndarray]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    op = header.get("op")
    if op == "describe":
        return dict(executor.describe(header), ok=True), []
    if op == "drop":
        return {"ok": True}, []
    reply, outputs = executor.infer(header, arrays)
    return dict(reply, ok=True), outputs


def _handle(
    executor: Executor, header: dict[str, Any], arrays: list[np.ndarray]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    failed = True
    try:
        reply, outputs = _serve(executor, header, arrays)
        failed = False
        return reply, outputs
    except RuntimeLayerError as exc:
        return {"ok": False, "kind": kind_of(exc), "message": str(exc)}, []
    except Exception as exc:  # anything else from ExecuTorch is that request's failure
        return {"ok": False, "kind": "execution", "message": f"{type(exc).__name__}: {exc}"}, []
    finally:
        executor.end_sessions(header, failed)


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
        executor.idle()
